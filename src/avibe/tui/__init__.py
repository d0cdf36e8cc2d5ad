"""The chat in the terminal (`vibe`, `vibe chat`; Textual): an edge that renders a hosted session's events
and sends the person's input back. `app` the screen, `driver` the session thread, `widgets`, `meter` the
context meter, `commands` the slash commands, `updates` what the thread tells the screen."""
