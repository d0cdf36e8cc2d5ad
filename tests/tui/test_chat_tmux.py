"""The real `vibe` in a real terminal (tmux): typed with send-keys, read with capture-pane. `vibe` alone
opens the chat; a hosted-model client talks to the scripted OpenAI-compatible server on loopback, so the
reply streams over SSE as a provider's does."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openai_chat import ChatServer, serve_chat

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"
)


class Terminal:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30, check=True
        )
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat")

    def type(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts} never appeared; the screen:\n{screen}")
            time.sleep(0.2)


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
           "AVIBE_SANDBOX": "full-access", "TERM": "xterm-256color",
           "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    inherited = [k for k in os.environ if k.startswith(("AVIBE_", "OPENAI_"))]
    unset = f"unset COLUMNS LINES {' '.join(inherited)}\n"  # the terminal's own size, not a runner's
    script = tmp_path / "vibe.sh"
    vibe = f"{shlex.quote(sys.executable)} -c 'from avibe.cli import main; main()'"
    script.write_text(f"{unset}{exports}cd {shlex.quote(str(work))}\n{vibe}\necho EXIT:$?\nsleep 120\n")
    term = Terminal(f"avibe-test-{os.getpid()}-{time.monotonic_ns()}")
    term.tmux("new-session", "-d", "-s", "chat", "-x", "110", "-y", "32", f"sh {shlex.quote(str(script))}")
    try:
        yield term
    finally:
        subprocess.run(["tmux", "-L", term.socket, "kill-server"], capture_output=True, timeout=30)


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
