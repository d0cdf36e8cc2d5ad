"""The real `vibe` in a real terminal (tmux): typed with send-keys, read with capture-pane. `vibe` alone
opens the chat; a hosted-model client talks to the scripted OpenAI-compatible server on loopback, so the
reply streams over SSE as a provider's does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tmux_support import TMUX, Terminal, open_vibe

from openai_chat import ChatServer, serve_chat

pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"
)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


@pytest.fixture
def terminal(tmp_path: Path, chat: ChatServer) -> Iterator[Terminal]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("ship on friday\n")
    env = {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
           "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url,
           "AVIBE_SANDBOX": "full-access"}  # fmt: skip
    term = open_vibe(tmp_path, env, ())  # `vibe` alone
    try:
        yield term
    finally:
        term.close()


def test_vibe_opens_the_chat_in_a_terminal_and_talks(terminal: Terminal, chat: ChatServer) -> None:
    chat.call("read_file", path="notes.txt")
    chat.say("The notes say: ship on friday.")
    screen = terminal.wait_for("new session s-", "ctx ", "idle")  # `vibe` alone: the chat, its meter
    assert "openai/gpt-4o" in screen
    terminal.type("Read notes.txt", "Enter")
    screen = terminal.wait_for("vibey› The notes say: ship on friday.", "idle")
    assert "you› Read notes.txt" in screen and "⚙ read_file" in screen and "notes.txt" in screen
    assert chat.requests[-1].get("stream") is True  # the reply was streamed to the screen
    terminal.type("/log --user", "Enter")
    terminal.wait_for("#1 ·", "user")
    terminal.type("C-c")
    terminal.wait_for("Ctrl-C again to quit")
    terminal.type("C-c")
    screen = terminal.wait_for("EXIT:0", "resume: vibe chat --session s-")
