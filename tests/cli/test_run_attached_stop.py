"""`vibe run --session S` attached to a session the real `vibe serve` hosts: Ctrl-C (SIGINT) stops the
host's step too, as an attached chat's Ctrl-C does - the stop note goes into the record, the host kills
its running `sleep` and ends the step, and no host runs that turn again; `vibe serve` goes on hosting the
session. Real processes over a scripted OpenAI-compatible model; no wall-clock asserts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.cli.attach import host_in_turn
from avibe.host.session import STOPPED_BY_PERSON
from avibe.record.entries import EntryQuery
from avibe.sources.process import process_alive
from avibe.store import open_store
from avibe.tools.sandbox import bwrap_problem
from openai_chat import ChatServer, serve_chat
from serve_support import VIBE, free_port, hosting, pids_running, start_serve, stop, vibe, vibe_env, wait_for


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot run here")
def test_ctrl_c_of_an_attached_vibe_run_stops_the_hosts_step(tmp_path: Path, chat: ChatServer) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    chat.say("Ready.")
    first = vibe(env, work, "run", "--no-wait", "--json", "Wait for my go.")
    session = next(json.loads(x)["session"] for x in first.stdout.splitlines() if '"turn_started"' in x)
    vibe(env, work, "timer", "add", "nightly", "--session", session, "--text", "check", "--every", "1h")
    port = free_port()
    serve = start_serve(env, work, port, tmp_path / "serve.log")
    marker = f"600.{os.getpid() % 1000}3"
    attached: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: session in hosting(port, home), timeout=30, what="vibe serve to host the session")
        chat.call("shell", command=f"sleep {marker}", timeout_s=600)
        chat.say("Stopped, as you asked.")
        attached = subprocess.Popen(
            [*VIBE, "run", "--session", session, "Run the long job."], env=env, cwd=work, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        running = wait_for(lambda: pids_running(marker), timeout=60, what="the host to run the sleep")
        asked = len(chat.requests)
        attached.send_signal(signal.SIGINT)  # the person's Ctrl-C in the attached `vibe run`
        out, err = attached.communicate(timeout=60)
        assert attached.returncode == 130, err
        with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
            wait_for(lambda: not host_in_turn(store, session), timeout=60, what="the host's turn to end")
            entries = store.query(EntryQuery(session))
        assert not any(process_alive(pid) for pid in running), "the host's sleep still runs"
        assert len(chat.requests) == asked  # the stopped step made no further model call
        assert [e.source for e in entries].count(STOPPED_BY_PERSON) == 1
        assert all(e.text != "Stopped, as you asked." for e in entries)  # nobody ran the turn on
        assert session in hosting(port, home)  # vibe serve still hosts it: the run never took it
        assert "attached" in out and "stops its step too" in err  # one line says so
    finally:
        if attached is not None and attached.poll() is None:
            attached.kill()
            attached.wait()
        stop(serve)
