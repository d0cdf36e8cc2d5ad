"""`vibe serve` takes a session over as the person left it (docs/serve.md), end to end on real processes
over a scripted OpenAI-compatible model: the session's recorded settings (approval, model) run it, not
serve's own defaults, and a turn the person stopped is not run again; a chat attached from elsewhere
sees the host's real state and stops its running `sleep` through the record; Ctrl-C stops `vibe serve`
mid-turn, killing the command, and it says what it left. No wall-clock asserts: what ended, and what the
record says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.agent.interrupted import NOTE_SOURCE
from avibe.cli.attach import ask_host_to_stop, host_in_turn
from avibe.cli.serve import EXIT_NOTE
from avibe.compose import SystemClock
from avibe.host.session import STOPPED_BY_PERSON
from avibe.ingress import deliver
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.state import SessionSettings
from avibe.sources.process import process_alive
from avibe.store import open_store
from avibe.tools.sandbox import bwrap_problem
from avibe.tui.driver import CANCEL_NOTE
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, pids_running, post_message, start_serve, stop, vibe, vibe_env, wait_for

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot run here")


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


def _first_session(env: dict[str, str], work: Path, *flags: str) -> str:
    done = vibe(env, work, "run", "--no-wait", "--json", *flags, "Wait for my go.")
    return next(json.loads(x)["session"] for x in done.stdout.splitlines() if '"turn_started"' in x)


def _serve(env: dict[str, str], work: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env["AVIBE_SERVE_URL"] = f"http://127.0.0.1:{port}"
    return start_serve(env, work, port, log), port


def _entries(home: Path, session: str) -> list[Entry]:
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        return store.query(EntryQuery(session))


def _answered(home: Path, session: str, reply: str) -> list[Entry]:
    def done() -> list[Entry] | None:
        entries = _entries(home, session)
        return entries if entries[-1].text == reply else None

    return wait_for(done, timeout=90, what=f"the reply {reply!r}")


def test_vibe_serve_runs_a_session_with_its_recorded_approval_and_model_and_not_a_stopped_turn(
    tmp_path: Path, chat: ChatServer
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)  # serve's own defaults: approval auto, model openai/gpt-4o
    chat.say("Ready.")
    session = _first_session(env, work, "--approval", "ask", "--model", "openai/gpt-4o-mini")
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        recorded = SessionSettings.from_stored(store.load_state(session, SessionSettings.KEY))
        assert (recorded.model, recorded.approval) == ("openai/gpt-4o-mini", "ask")
        # the person's message, then their Ctrl-C (the chat's stop note): a turn nobody runs again
        deliver(store, session, Source("user", name="kofi"), "Run the long job.", clock=SystemClock())
        deliver(store, session, STOPPED_BY_PERSON, CANCEL_NOTE, clock=SystemClock())
    serve, port = _serve(env, work, tmp_path / "serve.log")
    try:
        chat.call("shell", command="touch made.txt")
        chat.say("I could not make it.")
        assert post_message(home, port, session, "Go: make made.txt.").status_code == 202
        _answered(home, session, "I could not make it.")
    finally:
        stop(serve)
    assert not (work / "made.txt").exists()  # ask, recorded: nobody at serve's terminal approved it
    assert "nobody can approve here" in chat.tool_outputs()[-1]
    turn = chat.requests[1:]
    assert len(turn) == 2 and {request["model"] for request in turn} == {"gpt-4o-mini"}
    first = json.dumps(turn[0]["messages"])
    assert "Run the long job." in first and "Go: make made.txt." in first  # one turn took both in


@needs_bwrap
def test_a_chat_attached_elsewhere_sees_the_hosts_turn_and_its_stop_ends_the_hosts_sleep(
    tmp_path: Path, chat: ChatServer
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    chat.say("Ready.")
    session = _first_session(env, work)
    serve, port = _serve(env, work, tmp_path / "serve.log")
    marker = f"600.{os.getpid() % 1000}1"
    try:
        chat.call("shell", command=f"sleep {marker}", timeout_s=600)
        chat.say("Stopped, as you asked.")
        post_message(home, port, session, "Run the long job.")
        running = wait_for(lambda: pids_running(marker), timeout=60, what="the sleep to run")
        with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
            assert host_in_turn(store, session)  # what the attached chat shows: working, not idle
            asked = len(chat.requests)
            note = ask_host_to_stop(store, session, SystemClock())  # the attached chat's Ctrl-C
            wait_for(lambda: not host_in_turn(store, session), timeout=60, what="the host's turn to end")
        assert not any(process_alive(pid) for pid in running), "the sleep still runs"
        assert len(chat.requests) == asked  # the stopped step made no further model call
        entries = _entries(home, session)
        assert any(e.seq == note.seq and e.source == STOPPED_BY_PERSON for e in entries)
        assert entries[-1].text != "Stopped, as you asked."  # no host ran the stopped turn on
        post_message(home, port, session, "Go on.")
        _answered(home, session, "Stopped, as you asked.")
    finally:
        stop(serve)
    assert "pressed Ctrl-C" in json.dumps(chat.requests[-1]["messages"])  # the model was told


@needs_bwrap
def test_ctrl_c_stops_vibe_serve_mid_turn_and_it_says_what_it_left(tmp_path: Path, chat: ChatServer) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    chat.say("Ready.")
    session = _first_session(env, work)
    log = tmp_path / "serve.log"
    serve, port = _serve(env, work, log)
    marker = f"600.{os.getpid() % 1000}2"
    try:
        chat.call("shell", command=f"sleep {marker}", timeout_s=600)
        post_message(home, port, session, "Run the long job.")
        running = wait_for(lambda: pids_running(marker), timeout=60, what="the sleep to run")
        serve.send_signal(signal.SIGINT)
        code = serve.wait(timeout=60)  # generous; `vibe serve` exits at once (docs/serve.md)
    finally:
        stop(serve)
    assert code in (0, 130), log.read_text()[-2000:]  # 130: ended by SIGINT, as Ctrl-C ends a program
    assert f"left session {session} mid-turn" in log.read_text()
    assert not any(process_alive(pid) for pid in running), "the sleep still runs"
    last = _entries(home, session)[-1]
    assert (last.source, last.text) == (NOTE_SOURCE, EXIT_NOTE)  # the model is told; the turn resumes
