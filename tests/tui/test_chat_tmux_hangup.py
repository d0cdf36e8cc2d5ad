"""The real `vibe chat` in a real terminal (tmux) whose terminal vanishes - the tmux server is killed, as a
closed window or a dropped ssh connection does it: the chat must quit within seconds, not go on reading a
dead tty (it once used ~80% of a core for as long as it lived), and leave its session whole: what was said
is in the record, the lease is released, and a step it ran is stopped as Ctrl-C stops it - the shell
command killed, the stop note recorded, so no host runs that step again.

Both ways a terminal goes: the chat gets SIGHUP (it runs in the terminal's session), or it gets no signal
at all (`setsid`: another session; its tty just hangs up) - the way it used to spin."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tmux_support import TMUX, Terminal, open_vibe

from avibe.host.session import STOPPED_BY_PERSON
from avibe.record.entries import Entry, EntryQuery
from avibe.sources.process import process_alive
from avibe.store import SqlStore, open_store
from openai_chat import ChatServer, serve_chat
from serve_support import pids_running, vibe_env, wait_for

pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"
)
GONE_S = 8.0  # the chat quits within this (its own stop takes ~0.2 s; the rest is the loaded CI box)
HOW = {"sighup": "", "no-signal": "setsid -w"}  # what runs before `vibe chat` in the pane


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def _open(tmp_path: Path, chat: ChatServer, terminals: list[Terminal], how: str) -> Terminal:
    env = vibe_env(tmp_path / "home", chat) | {"AVIBE_SANDBOX": "full-access"}
    terminals.append(open_vibe(tmp_path, env, ("chat",), before=HOW[how]))
    return terminals[-1]


def _closed(terminal: Terminal) -> None:
    """Close the terminal; the chat must be gone soon after."""
    pid = terminal.vibe_pid()
    terminal.kill_server()
    wait_for(lambda: not process_alive(pid), timeout=GONE_S, what="vibe chat to quit with its terminal")


def _record(tmp_path: Path) -> tuple[SqlStore, str, list[Entry]]:
    store = open_store(f"sqlite:///{tmp_path / 'home' / 'avibe.db'}")
    (session,) = store.list_sessions()
    return store, session.id, store.query(EntryQuery(session.id))


@pytest.mark.parametrize("how", HOW)
def test_a_chat_quits_when_its_terminal_goes(
    tmp_path: Path, chat: ChatServer, terminals: list[Terminal], how: str
) -> None:
    chat.say("Noted: ship on friday.")
    terminal = _open(tmp_path, chat, terminals, how)
    terminal.wait_for("new session s-", "idle")
    terminal.type("We ship on friday.", "Enter")
    terminal.wait_for("vibey› Noted: ship on friday.", "idle")
    _closed(terminal)
    store, session, entries = _record(tmp_path)
    with store:
        assert [(e.kind, e.text) for e in entries] == [
            ("user", "We ship on friday."),
            ("assistant", "Noted: ship on friday."),
        ]
        assert store.session_lease(session) is None  # released on the way out, not left to go stale


@pytest.mark.parametrize("how", HOW)
def test_a_step_running_when_the_terminal_goes_is_stopped_as_ctrl_c_stops_it(
    tmp_path: Path, chat: ChatServer, terminals: list[Terminal], how: str
) -> None:
    marker = f"300.{os.getpid() % 1000}{len(how)}"
    chat.call("shell", command=f"sleep {marker}", timeout_s=600)
    terminal = _open(tmp_path, chat, terminals, how)
    terminal.wait_for("new session s-", "idle")
    terminal.type("Run the long job", "Enter")
    running = wait_for(lambda: pids_running(marker), timeout=60, what="the sleep to run")
    _closed(terminal)
    assert not any(process_alive(pid) for pid in running), "the command outlived the chat"
    store, session, entries = _record(tmp_path)
    with store:
        assert entries[0].text == "Run the long job" and entries[-1].source == STOPPED_BY_PERSON
        assert "shell" in entries[-1].text  # the note names the call that was stopped
        assert store.session_lease(session) is None
    assert len(chat.requests) == 1  # the step ended at the stop: no model request after it
