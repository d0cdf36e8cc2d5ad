"""What the real `vibe serve` says while it works: one terminal line per input it takes
in and per turn - the session, who sent what, a short one-line preview behind the frame mark - and none
with `--quiet`; its log says `idle` only when that changes (not five times a second while a watch is
active), and rotates by size instead of growing for ever."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.record.entries import EntryQuery
from avibe.record.sources import FRAME
from avibe.store import open_store
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, post_message, start_serve, stop, vibe, vibe_env, wait_for

FILLER = "an old line of the log\n"
IDLE = "{'kind': 'idle', 'waiting_for': ()}"
LOG_MAX_BYTES = 10 * 1024 * 1024  # docs/serve.md: avibe.log is rotated at 10 MiB, three old files kept


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Looked at it: the build is green now."
        yield server


def _session(env: dict[str, str], work: Path) -> str:
    done = vibe(env, work, "run", "--no-wait", "--json", "Keep an eye on the build.")
    return str(
        next(json.loads(line)["session"] for line in done.stdout.splitlines() if "turn_started" in line)
    )


def _replies(home: Path, session: str) -> int:
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        return sum(e.kind == "assistant" for e in store.query(EntryQuery(session)))


def _post(port: int, home: Path, session: str, text: str) -> None:
    response = post_message(home, port, session, text)  # through the local socket, as the person
    assert response.status_code == 202, response.text


def test_serve_prints_a_line_per_input_and_turn_logs_idle_on_change_and_rotates_its_log(
    tmp_path: Path, chat: ChatServer
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "status.txt").write_text("building\n")
    env = vibe_env(home, chat)
    session = _session(env, work)
    vibe(env, work, "watch", "add", "ci", "--session", session, "--every", "1s", "--file", "status.txt")
    log = home / "logs" / "avibe.log"  # a log at its size limit, as months of serving leave it
    log.write_text(FILLER * (LOG_MAX_BYTES // len(FILLER) + 1))

    port, printed = free_port(), tmp_path / "serve.out"
    env["AVIBE_SERVE_URL"] = f"http://127.0.0.1:{port}"
    serve = start_serve(env, work, port, printed)
    try:
        _post(port, home, session, "Is the build\nstill red?")
        wait_for(lambda: _replies(home, session) == 2, timeout=60, what="the turn the message started")
        wait_for(lambda: _events_logged(log, session)[-1:] == [IDLE], timeout=30, what="the host idle")
        (work / "status.txt").write_text("failed: 3 tests\n")
        wait_for(lambda: _replies(home, session) == 3, timeout=60, what="the turn the watch started")
        wait_for(lambda: len(_printed(printed)) == 4, timeout=30, what="a line per input and per turn")
        looks: set[str] = set()  # the watch, still active, goes on looking while the host idles

        def looked_thrice() -> bool:
            looks.add(_checked_at(home, session))
            return len(looks) >= 4

        wait_for(looked_thrice, timeout=30, what="three more looks of the watch")
    finally:
        stop(serve)

    who = f"[serve] session {session}"
    expected = [
        f"{who} input #3: message from kofi {FRAME} Is the build",
        f"{who} turn by vibey: replied (1 step) {FRAME} Looked at it: the build is green now.",
        f"{who} input #5: watch ci {FRAME} ",
        f"{who} turn by vibey: replied (1 step) {FRAME} Looked at it: the build is green now.",
    ]
    shown = _printed(printed)
    assert all(line.startswith(want) for line, want in zip(shown, expected, strict=True)), shown
    assert shown[2].endswith("…") and "still red" not in shown[0]  # a text's first line, clipped

    logged = _events_logged(log, session)
    repeats = [a for a, b in itertools.pairwise(logged) if a == b and "'idle'" in a]
    assert "'idle'" in logged[-1] and not repeats, logged

    old = log.with_name("avibe.log.1")  # rotated: the full log moved aside, a new one begun
    assert old.read_text().startswith(FILLER) and not log.read_text().startswith(FILLER)
    assert log.stat().st_size < LOG_MAX_BYTES


def test_serve_quiet_prints_no_line_per_input(tmp_path: Path, chat: ChatServer) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    session = _session(env, work)
    port, printed = free_port(), tmp_path / "serve.out"
    env["AVIBE_SERVE_URL"] = f"http://127.0.0.1:{port}"
    serve = start_serve(env, work, port, printed, "--quiet")
    try:
        _post(port, home, session, "anything new?")
        wait_for(lambda: _replies(home, session) == 2, timeout=60, what="the turn the message started")
    finally:
        stop(serve)
    assert "[serve] http://" in printed.read_text()  # where it listens: still said
    assert "[serve] session" not in printed.read_text()
    logged = (home / "logs" / "avibe.log").read_text()
    assert f"session {session}: {{'kind': 'turn_ended'" in logged  # the log still has every event


def _events_logged(log: Path, session: str) -> list[str]:
    """The events logged for `session`, in order, without their time stamps."""
    pattern = re.compile(rf"INFO avibe\.serve: session {re.escape(session)}: (\{{'kind'.*)")
    return [found.group(1) for line in log.read_text().splitlines() if (found := pattern.search(line))]


def _printed(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("[serve] session")]


def _checked_at(home: Path, session: str) -> str:
    """When the session's watch last looked."""
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        return str(next(f.state.get("checked_at") for f in store.list_feeds(session)))
