"""The real `vibe` in a real terminal (tmux) (docs/chat.md, stopping): Ctrl-C stops a shell command the
model started (a real `sleep` in bubblewrap) and an external agent's program while they run - their
processes are gone once the screen says so - and the session goes on; `vibe chat --session S` attaches to
the session the real `vibe serve` hosts, sends the person's message there and shows what it records."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_chat_stop import FAKE_AGENT, _pids_running
from tmux_support import TMUX, Terminal, open_vibe

from avibe.backends.install import installed_bin
from avibe.sources.process import process_alive
from avibe.tools.sandbox import bwrap_problem
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, hosting, start_serve, stop, vibe, vibe_env, wait_for

pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"
)
Open = Callable[..., Terminal]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


@pytest.fixture
def open_terminal(tmp_path: Path, chat: ChatServer) -> Iterator[Open]:
    """`open_terminal(*args)`: `vibe ARGS` in a tmux terminal of 110x32 over this test's home and folder."""
    terminals: list[Terminal] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Terminal:
        terminals.append(open_vibe(tmp_path, env or vibe_env(tmp_path / "home", chat), args))
        return terminals[-1]

    yield start
    for terminal in terminals:
        terminal.close()


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot run here")
def test_ctrl_c_stops_a_running_shell_command_in_the_terminal(open_terminal: Open, chat: ChatServer) -> None:
    marker = f"300.{os.getpid() % 1000}"
    chat.call("shell", command=f"sleep {marker}", timeout_s=600)
    chat.say("Stopped, as you asked.")
    terminal = open_terminal()
    terminal.wait_for("new session s-", "idle")
    terminal.type("Run the long job", "Enter")
    running = wait_for(lambda: _pids_running(marker), timeout=60, what="the sleep to run")
    terminal.type("C-c")
    terminal.wait_for("step cancelled")
    assert not any(process_alive(pid) for pid in running), "the command still runs"
    time.sleep(3.2)  # a second Ctrl-C within 3 s would quit
    terminal.type("go on", "Enter")
    terminal.wait_for("vibey› Stopped, as you asked.", "idle")
    last = json.dumps(chat.requests[-1]["messages"])
    assert "stopped by the user (Ctrl-C)" in last  # the tool's result and the note reached the model


def test_ctrl_c_stops_a_running_external_agent_in_the_terminal(open_terminal: Open, tmp_path: Path) -> None:
    pids, prompt = tmp_path / "agent.pids", tmp_path / "prompt.txt"
    program = installed_bin(tmp_path / "home") / "claude"
    program.parent.mkdir(parents=True)
    program.write_text(
        f"#!{sys.executable}\n" + FAKE_AGENT.format(long=300, pids=str(pids), prompt=str(prompt))
    )
    program.chmod(0o755)
    terminal = open_terminal("chat", "--agent", "claude-code")
    terminal.wait_for("new session s-", "idle")
    terminal.type("Do the long thing", "Enter")
    wait_for(lambda: pids.exists() and pids.read_text().count(" ") == 1, timeout=60, what="the agent")
    running = [int(pid) for pid in pids.read_text().split()]
    terminal.type("C-c")
    terminal.wait_for("step cancelled")
    assert not any(process_alive(pid) for pid in running), "the agent or its child still runs"
    time.sleep(3.2)
    terminal.type("go on", "Enter")
    terminal.wait_for("claude-code› Going on.", "idle")
    assert "stopped by the user (Ctrl-C)" in prompt.read_text()


def test_vibe_chat_session_attaches_to_the_session_vibe_serve_hosts(
    open_terminal: Open, chat: ChatServer, tmp_path: Path
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    chat.say("Ready.")
    first = vibe(env, work, "run", "--no-wait", "--json", "Watch the nightly build.")
    session = next(json.loads(x)["session"] for x in first.stdout.splitlines() if '"turn_started"' in x)
    vibe(env, work, "timer", "add", "nightly", "--session", session, "--text", "check", "--every", "1h")
    port = free_port()
    serve = start_serve(env, work, port, tmp_path / "serve.log")
    try:
        wait_for(lambda: session in hosting(port, home), timeout=30, what="vibe serve to host the session")
        terminal = open_terminal("chat", "--session", session, env=env)
        terminal.wait_for(f"attached to session {session}", f"pid {serve.pid}")
        chat.say("The build is green.")
        terminal.type("How is the build?", "Enter")
        terminal.wait_for("vibey› The build is green.", timeout=60)
        chat.say("Noted: friday.")
        assert vibe(env, work, "send", "--to", session, "Release on friday.").returncode == 0
        screen = terminal.wait_for("you› Release on friday.", "vibey› Noted: friday.", timeout=60)
        assert screen.count("How is the build?") == 1
        terminal.type("C-c")
        terminal.wait_for("Ctrl-C again to quit")
        terminal.type("C-c")
        terminal.wait_for("EXIT:0")
        assert session in hosting(port, home)  # vibe serve still hosts it: the chat never took it
    finally:
        stop(serve)
