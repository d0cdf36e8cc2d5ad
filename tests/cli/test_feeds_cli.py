"""The feed commands as a new user meets them, through the real `vibe`: the help says
"Watches"; a one-shot timer that fired is listed as fired, and no longer keeps its session hosted; a file
watch on a file that is not there is kept (its appearing is a change worth posting) but says so."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from avibe.record.entries import EntryQuery
from avibe.store import open_store
from openai_chat import serve_chat
from serve_support import VIBE, vibe, vibe_env


def test_help_says_watches() -> None:  # no "Watchs" anywhere a command lists its groups
    for args in ((), ("watch",), ("timer",), ("callback",)):
        shown = subprocess.run([*VIBE, *args, "--help"], capture_output=True, text=True, timeout=60).stdout
        assert "Watchs" not in shown, shown
    top = subprocess.run([*VIBE, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "Watches that post into a session." in top and "Timers that post into a session." in top, top


def test_a_fired_one_shot_timer_is_listed_as_fired_and_lets_its_host_go(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with serve_chat() as chat:
        chat.default = "Shipping."
        env = vibe_env(home, chat)
        first = vibe(env, work, "run", "--json", "Ship when the timer says so.")
        session = next(
            json.loads(line)["session"] for line in first.stdout.splitlines() if "turn_started" in line
        )
        added = vibe(
            env, work, "timer", "add", "ship", "--session", session, "--text", "ship it", "--at", "+1s"
        )
        assert added.returncode == 0, added.stderr
        assert _state(env, work, "timer", "list") == "active"
        time.sleep(1.5)  # let its time pass (a time in the future is all `--at` takes)
        assert datetime.now(UTC) > _at(home, session)
        # A host of just this session until it is idle: the timer fires, Vibey takes the turn, and with
        # nothing left to post the host exits (a fired timer once kept it hosted for ever).
        hosted = vibe(env, work, "serve", "--session", session, "--exit-when-idle", timeout=90)
        assert hosted.returncode == 0, hosted.stderr
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        timers = [e for e in store.query(EntryQuery(session)) if e.kind == "timer"]
    assert [e.text for e in timers] == ["ship it"]
    for command in (("timer", "list"), ("feeds",)):
        assert _state(env, work, *command).startswith("fired 20"), command  # fired <its time>, not active


def test_a_file_watch_on_a_missing_file_is_kept_with_a_warning(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "there.txt").write_text("here\n")
    with serve_chat() as chat:
        env = vibe_env(home, chat)
        first = vibe(env, work, "run", "--json", "hello")
        session = next(
            json.loads(line)["session"] for line in first.stdout.splitlines() if "turn_started" in line
        )
        missing = vibe(env, work, "watch", "add", "nope", "--session", session, "--file", "nope.txt")
        present = vibe(env, work, "watch", "add", "there", "--session", session, "--file", "there.txt")
    assert missing.returncode == 0 and present.returncode == 0, missing.stderr + present.stderr
    assert missing.stderr.strip() == (
        f"vibe: warning: {work.resolve() / 'nope.txt'} does not exist (yet); the watch posts when it appears"
    )
    assert present.stderr == ""
    assert "posts into session" in missing.stdout


def _state(env: dict[str, str], work: Path, *command: str) -> str:
    """The STATE column of the one feed `command` lists."""
    listed = vibe(env, work, *command).stdout.splitlines()
    assert len(listed) == 2, listed  # the header and the timer
    return listed[1][listed[0].index("STATE") :].strip()


def _at(home: Path, session: str) -> datetime:
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        return datetime.fromisoformat(store.list_feeds(session)[0].spec["at"])
