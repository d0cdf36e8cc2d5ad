"""The real `vibe` in a real terminal (tmux), scroll-back (docs/chat.md): after a streamed reply taller than
the screen, the screen shows its end; once the person scrolls up (PageUp) the view stays where they read and
says "new messages below" when more arrives; back at the end (PageDown) it follows again."""

from __future__ import annotations

import os
import time

import pytest
from test_chat_tmux import chat, terminal
from tmux_support import TMUX, Terminal

from openai_chat import ChatServer

pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"
)
__all__ = ["chat", "terminal"]  # the fixtures, shared with the first tmux test

HINT = "new messages below"


def _long(name: str, lines: int = 70) -> str:
    return "\n".join(f"{name} line {n} of {lines}" for n in range(1, lines + 1))


def _gone(terminal: Terminal, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while text in (screen := terminal.screen()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never went away; the screen:\n{screen}")
        time.sleep(0.2)
    return screen


def test_the_chat_follows_a_long_reply_and_holds_still_when_scrolled_up(
    terminal: Terminal, chat: ChatServer
) -> None:
    chat.say(_long("first"))
    chat.say(_long("second"))
    chat.say("third reply, short")
    terminal.wait_for("new session s-", "idle")
    terminal.type("Write it all out", "Enter")
    screen = terminal.wait_for("first line 70 of 70", "idle")  # the end of the reply is on the screen
    assert "first line 1 of 70" not in screen and HINT not in screen

    terminal.type("PageUp")  # the person scrolls up to read
    screen = _gone(terminal, "first line 70 of 70")
    terminal.type("again", "Enter")
    screen = terminal.wait_for(HINT, "idle")  # the reply arrived below, the view held still
    assert "second line 70 of 70" not in screen

    for _ in range(20):  # back down to the end: following again, the hint gone
        if "second line 70 of 70" in terminal.screen():
            break
        terminal.type("PageDown")
        time.sleep(0.3)
    screen = _gone(terminal, HINT)
    terminal.type("last one", "Enter")
    screen = terminal.wait_for("vibey› third reply, short", "idle")
    assert HINT not in screen
