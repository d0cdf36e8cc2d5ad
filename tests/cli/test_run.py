"""`vibe run` end to end through the real CLI, on a hosted-model client talking to an OpenAI-compatible
server on loopback: the session is hosted until idle, `--json` prints every typed event as a JSON line,
`--continue` resumes the working directory's latest session, and the default output keeps context work
(checkpoints) off the screen unless `--verbose`, in a run that really checkpoints (U1, U2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openai_chat import ChatServer, serve_chat


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        yield server


def _vibe(tmp_path: Path, chat: ChatServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    env |= {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
            "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url,
            "AVIBE_SANDBOX": "full-access"}  # fmt: skip
    command = [sys.executable, "-c", "from avibe.cli import main; main()", *args]
    return subprocess.run(
        command, env=env, cwd=tmp_path / "work", capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("ship on friday\n")
    return folder


def test_run_json_prints_every_event_and_continue_resumes_the_session(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    chat.call("read_file", path="notes.txt")
    chat.say("The notes say: ship on friday.")
    first = _vibe(tmp_path, chat, "run", "--json", "Read notes.txt")
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]  # every line is one JSON event
    kinds = [e["kind"] for e in events]
    for kind in ("input", "turn_started", "model_started", "model_call", "tool_call", "tool_result", "reply"):
        assert kind in kinds, kinds
    assert kinds[-1] == "idle" and events[0]["source"] == "user" and events[0]["text"] == "Read notes.txt"
    session = next(e["session"] for e in events if e["kind"] == "turn_started")

    chat.say("You're welcome.")
    again = _vibe(tmp_path, chat, "run", "--json", "--continue", "thanks")
    assert again.returncode == 0, again.stderr
    resumed = [json.loads(line) for line in again.stdout.splitlines()]
    assert next(e["session"] for e in resumed if e["kind"] == "turn_started") == session
    history = [m.get("content") for m in chat.requests[-1]["messages"]]
    assert "Read notes.txt" in history and "thanks" in history  # the same conversation goes on


SCENE = (
    "<checkpoint>\nCurrent step: reading big.txt for the user and then reporting what it holds\n"
    "Progress: done: read big.txt in full; in progress: reporting what it says\nWaiting for: none\n"
    'Next step: tell the user what big.txt says, as the user asked: "Read big.txt"\nPitfalls: none\n'
    "Exact references: big.txt\n</checkpoint>\n"
)


def _checkpointing(chat: ChatServer, work: Path) -> None:
    """A run that really checkpoints at a 6,000-token window: two reads of a ~2,000-token file pass the
    trigger; the checkpoint turn (the request offering the `done` tool) is answered with a valid scene."""
    lines = (f"big.txt line {i:04d}: lorem ipsum dolor sit\n" for i in range(250))
    (work / "big.txt").write_text("".join(lines))

    def checkpoint_turn(body: dict[str, Any]) -> dict[str, Any] | None:
        names = [tool["function"]["name"] for tool in body.get("tools") or ()]
        return {"role": "assistant", "content": SCENE} if "done" in names else None

    chat.responder = checkpoint_turn
    chat.call("read_file", path="big.txt")
    chat.call("read_file", path="big.txt")
    chat.say("big.txt is lorem ipsum.")


def _accepted(tmp_path: Path, chat: ChatServer) -> list[dict[str, Any]]:
    listed = _vibe(tmp_path, chat, "checkpoints", "--json")
    assert listed.returncode == 0, listed.stderr
    return [c for c in json.loads(listed.stdout) if c["meta"]["fallback"] is None]


def test_U1_run_keeps_an_accepted_checkpoint_off_the_screen_unless_verbose(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    _checkpointing(chat, work)
    quiet = _vibe(tmp_path, chat, "run", "--window", "6000", "Read big.txt")
    assert quiet.returncode == 0, quiet.stderr
    assert len(_accepted(tmp_path, chat)) == 1  # the run did checkpoint, and the checkpoint was accepted
    lines = quiet.stdout.splitlines()
    assert "vibey> big.txt is lorem ipsum." in lines and '[tool] read_file {"path": "big.txt"}' in lines
    assert not [line for line in lines if line.startswith(("[checkpoint]", "[model]"))], quiet.stdout

    _checkpointing(chat, work)
    verbose = _vibe(tmp_path, chat, "run", "--verbose", "--window", "6000", "Read big.txt")
    assert verbose.returncode == 0, verbose.stderr
    assert len(_accepted(tmp_path, chat)) == 1  # this run's session: its own one checkpoint
    shown = [line for line in verbose.stdout.splitlines() if line.startswith("[checkpoint] 1: ")]
    assert len(shown) == 1 and " -> " in shown[0], verbose.stdout
    assert "[model] step 1" in verbose.stdout


def test_continue_without_a_session_in_this_folder_is_one_clear_error(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    done = _vibe(tmp_path, chat, "run", "--continue", "hi")
    assert done.returncode == 2 and done.stderr.startswith("vibe: no session has run in")
    assert "Traceback" not in done.stderr and not chat.requests


def test_a_long_task_comes_from_a_file_or_standard_input_byte_for_byte(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    """A task over 128 KiB cannot be an argument: --file and - carry it whole."""
    task = "Review these notes, one per line:\n" + "".join(
        f"note {i}: ship on friday\n" for i in range(8_000)
    )
    assert len(task.encode()) > 128 * 1024
    (tmp_path / "TASK.md").write_text(task, encoding="utf-8")
    chat.say("Read them.")
    done = _vibe(tmp_path, chat, "run", "--window", "200000", "--file", str(tmp_path / "TASK.md"))
    assert done.returncode == 0, done.stderr
    assert chat.requests[-1]["messages"][-1]["content"] == task
    chat.say("Read them again.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    env |= {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_MODEL": "openai/gpt-4o",
            "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url}  # fmt: skip
    piped = subprocess.run(
        [sys.executable, "-c", "from avibe.cli import main; main()", "run", "--window", "200000", "-"],
        input=task, env=env, cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert chat.requests[-1]["messages"][-1]["content"] == task


def test_a_task_given_twice_or_not_at_all_is_refused_before_anything_is_written(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    (tmp_path / "TASK.md").write_text("do it", encoding="utf-8")
    for args in (["run"], ["run", "do it", "--file", str(tmp_path / "TASK.md")]):
        done = _vibe(tmp_path, chat, *args)
        assert done.returncode == 2 and done.stderr.startswith("vibe: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "home" / "avibe.db").exists() and not chat.requests


def test_run_streams_the_reply_and_shows_it_once(tmp_path: Path, work: Path, chat: ChatServer) -> None:
    """the reply is streamed (SSE from the server, deltas on the screen as they come)
    and ends up on one `vibey> ` line, not printed a second time when the turn's reply arrives."""
    reply = "The notes say: ship on friday, after the last review."
    chat.call("read_file", path="notes.txt")
    chat.say(reply)
    done = _vibe(tmp_path, chat, "run", "Read notes.txt")
    assert done.returncode == 0, done.stderr
    assert [r.get("stream") for r in chat.requests] == [True, True]
    assert done.stdout.count("ship on friday, after") == 1
    lines = done.stdout.splitlines()
    assert lines.index(f"vibey> {reply}") == 1 + next(
        i for i, x in enumerate(lines) if x.startswith("[tool]")
    )

    chat.say(reply)
    as_json = _vibe(tmp_path, chat, "run", "--json", "--continue", "Again")
    assert as_json.returncode == 0, as_json.stderr
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    deltas = [e["text"] for e in events if e["kind"] == "reply_delta"]
    assert len(deltas) > 1 and "".join(deltas) == reply and all(deltas)  # no heartbeat printed
    kinds = [e["kind"] for e in events]
    assert kinds.index("model_started") < kinds.index("reply_delta") < kinds.index("model_call")


def test_F1_run_compaction_handoff_makes_room_with_a_handoff_and_records_it(
    tmp_path: Path, work: Path, chat: ChatServer
) -> None:
    """`vibe run --compaction handoff`: past the trigger the handoff's summary request (no tools, the
    handoff prompt last) replaces the checkpoint turn; the run goes on from its summary."""
    _checkpointing(chat, work)
    summary = {"role": "assistant", "content": "HANDOFF-SUMMARY: big.txt was read twice; report it."}
    chat.responder = lambda body: summary if "handing this task over" in str(body["messages"][-1]) else None
    done = _vibe(
        tmp_path, chat, "run", "--json", "--window", "6000", "--compaction", "handoff", "Read big.txt"
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    compacted = [e for e in events if e["kind"] == "compacted"]  # each read of big.txt passes the trigger
    assert compacted and all(e["strategy"] == "handoff" and e["after"] < e["before"] for e in compacted)
    assert not [e for e in events if e["kind"] in ("checkpoint_started", "checkpoint")]
    assert any("HANDOFF-SUMMARY" in str(m.get("content")) for m in chat.requests[-1]["messages"])
    assert not _accepted(tmp_path, chat)  # no checkpoint was made
    wrong = _vibe(tmp_path, chat, "run", "--compaction", "summarise-it", "hi")
    assert wrong.returncode == 2 and "unknown --compaction" in wrong.stderr and "handoff" in wrong.stderr
