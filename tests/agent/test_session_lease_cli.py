"""One writer per session, through the real CLI (docs/serve.md, session leases): two `vibe run`
processes on one SQLite file. While the first hosts the session (stuck in a model call on a loopback
server), a second `vibe run --session S` does not write as a second host: it attaches - posts its message
through ingress and follows the record - and the lease stays the first's. When the first is killed with
SIGKILL, the attached run finds its lease stale, takes the session over (the log says so) and answers
the message it posted, once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openai_chat import ChatServer, serve_chat


@pytest.fixture
def server() -> Iterator[ChatServer]:
    """The model's server: a call that takes minutes is the first request held (`hold_first`)."""
    with serve_chat() as chat:
        chat.default = "done."
        yield chat


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    return env | {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
                  "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": url,
                  "AVIBE_SANDBOX": "full-access"}  # fmt: skip


def _command(*args: str) -> list[str]:
    return [sys.executable, "-c", "from avibe.cli import main; main()", *args]


def _record(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every entry and lease row, read without writing (mode=ro)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        entries = conn.execute("select session, seq, kind, text from entries order by id").fetchall()
        leases = conn.execute("select session, pid, host, token, acquired_at from session_leases").fetchall()
    return entries, leases


def test_a_second_run_is_refused_while_the_first_hosts_and_takes_over_after_kill_9(
    tmp_path: Path, server: ChatServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = _env(tmp_path, server.url)
    server.hold_first = threading.Event()  # the first run's model call hangs until released
    first = subprocess.Popen(
        _command("run", "--json", "first task"),
        env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        session = ""
        assert first.stdout is not None
        for line in first.stdout:
            event = json.loads(line)
            if event["kind"] == "turn_started":
                session = event["session"]
                break
        assert session, "the first run printed no turn_started event"
        assert server.first_arrived.wait(60), "the first run never called the model"
        db = tmp_path / "home" / "avibe.db"
        before = _record(db)
        assert [(e[1], e[2], e[3]) for e in before[0]] == [(1, "user", "first task")]
        assert len(before[1]) == 1 and before[1][0][:2] == (session, first.pid)

        second = subprocess.Popen(
            _command("run", "--session", session, "second task"),
            env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(_record(db)[0]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        entries, leases = _record(db)
        assert [(e[2], e[3]) for e in entries] == [("user", "first task"), ("user", "second task")]
        assert leases == before[1]  # attached: the lease is still the first's
        assert second.poll() is None and len(server.requests) == 1  # it waits for the first host

        first.send_signal(signal.SIGKILL)
        first.wait(30)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert f"hosted by pid {first.pid}" in out and "vibey> done." in out
        entries, leases = _record(db)
        assert [(e[2], e[3]) for e in entries] == [("user", "first task"), ("user", "second task"),
                                                     ("assistant", "done.")]  # fmt: skip
        assert leases == []  # released when the run ended
        log = (tmp_path / "home" / "logs" / "avibe.log").read_text(encoding="utf-8")
        assert f"session {session}: took over the lease of pid {first.pid}" in log
        assert f"its process {first.pid}" in log and "is gone" in log
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()  # reaps it and closes its pipes
        assert server.hold_first is not None
        server.hold_first.set()


def test_a_finished_run_leaves_the_session_free_for_the_next(tmp_path: Path, server: ChatServer) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = _env(tmp_path, server.url)
    one = subprocess.run(_command("run", "--json", "hello"), env=env, cwd=work, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert one.returncode == 0, one.stderr
    two = subprocess.run(_command("run", "--continue", "again"), env=env, cwd=work, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert two.returncode == 0, two.stderr
    entries, leases = _record(tmp_path / "home" / "avibe.db")
    assert [e[3] for e in entries] == ["hello", "done.", "again", "done."] and leases == []
    assert "took over" not in (tmp_path / "home" / "logs" / "avibe.log").read_text(encoding="utf-8")
