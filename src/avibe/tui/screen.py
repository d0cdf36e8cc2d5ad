"""The chat's screen as drawn: its layout (CSS), the conversation log that grows and follows (or, scrolled
up, says there is more below), and paging through it. `avibe.tui.app.ChatApp` builds on it."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.driver import Driver
from textual.widgets import Static

from avibe.tui.terminal import TerminalDriver
from avibe.tui.widgets import ApprovalBar, Bubble, ChatLog


class ChatScreen(App[None]):
    CSS = """
    Screen { layout: vertical; }
    #log { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    Bubble, InputBubble { margin: 1 0 0 0; }
    .user { background: $boost; padding: 0 1; }
    .input { border-left: thick $warning; padding: 0 1; }
    .error { color: $error; }
    .notice { color: $text-muted; }
    .output { padding: 0 1; }
    ToolLine { border: none; padding: 0; margin: 0; background: transparent; }
    ToolLine.failed CollapsibleTitle { color: $error; }
    ToolLine Contents { padding: 0 0 0 3; }
    #below { height: 1; width: 100%; content-align: center middle; background: $accent; display: none; }
    #asks { height: auto; }
    ApprovalBar { height: auto; border: heavy $warning; padding: 0 1; }
    ChatInput { height: auto; min-height: 3; max-height: 10; border: round $accent; }
    #status { height: 1; background: $panel; padding: 0 1; }
    """
    _ask: ApprovalBar | None = None  # the approval asked now (PageUp / PageDown read it)

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, which also says when the terminal goes away (`HungUp`); tests run
        the app headless, on Textual's own driver."""
        return TerminalDriver

    def _add(self, widget: Any) -> Any:
        found = list(self.query("#log").results(ChatLog))
        if not found:  # the app is shutting down: nothing more to draw
            return widget
        found[0].mount(widget)
        self._grew()
        return widget

    def _grew(self) -> None:
        """The conversation got longer: follow it, or (the person scrolled up) say there is more below."""
        for log in self.query("#log").results(ChatLog):
            log.follow()
            if log.away:
                self.query_one("#below", Static).display = True

    def on_chat_log_away(self, message: ChatLog.Away) -> None:
        if not message.away:  # back at the end: following again
            self.query_one("#below", Static).display = False

    def action_page(self, direction: int) -> None:
        if self._ask is not None:  # a question is open: PageUp / PageDown read it
            self._ask.action_scroll_body("page_down" if direction > 0 else "page_up")
            return
        log = self.query_one("#log", ChatLog)
        if direction > 0:
            log.scroll_page_down(animate=False)
        else:
            log.scroll_page_up(animate=False)

    def _say(self, text: str, kind: str) -> None:
        self._add(Bubble(text, kind))
