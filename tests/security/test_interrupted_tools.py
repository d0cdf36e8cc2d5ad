"""A process killed while a tool runs: the resumed session names the interrupted call.

Before: the resumed view dropped a tool-calls-only step whose process died, silently - the model saw the
user's request as if nothing had happened and could run a non-idempotent command again. Now the harness
records one note (a harness entry, never the user's) naming each call that did not report back, the first
as "outcome unknown", and answers a call left open in the live context, so the conversation stays valid.
Real kill -9, real bubblewrap shell, real SQLite record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))  # vibey_doubles

from vibey_doubles import CharCounter, StepClock

from avibe.agent.loop import RunConfig, Vibey
from avibe.host.session import SessionHost
from avibe.ingress import deliver, record_reply
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import CallRecord, EntryQuery, Source
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

HERE = Path(__file__).parent


def _kill_while_the_shell_runs(tmp: Path, calls: str) -> str:
    work = tmp / "work"
    work.mkdir()
    (work / "notes.txt").write_text("notes\n")
    marker = work / ".running"  # inside the workdir: the sandbox has a private /tmp
    paths = [str(HERE), str(HERE.parent / "agent"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    args = [sys.executable, str(HERE / "interrupted_worker.py"), str(tmp / "avibe.db"), str(work)]
    args += [str(tmp / "sess"), str(marker), calls]
    log = tmp / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while not marker.exists():
                assert proc.poll() is None, f"worker exited early: {log.read_text()}"
                assert time.monotonic() < deadline, "the shell command never started"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return log.read_text().split()[0]


def _resume(tmp: Path, session: str, seen: list[ModelRequest]) -> Vibey:
    store = open_store(f"sqlite:///{tmp / 'avibe.db'}")
    toolbox = ToolBox(default_tools(tmp / "work", store=store, session_id=session))

    def answer(request: ModelRequest) -> object:
        seen.append(request)
        return reply("checked the log first")

    return Vibey(
        store=store,
        model=ScriptedModel.of([answer], window=8_000),
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session,
        session_dir=tmp / "sess",
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("calls", ["one", "two"])
def test_kill_9_while_a_shell_tool_runs_is_noted_as_interrupted(tmp_path: Path, calls: str) -> None:
    """item 14: the step's shell call is named, outcome unknown, in a harness note the model reads."""
    session = _kill_while_the_shell_runs(tmp_path, calls)
    assert (tmp_path / "work" / "log.txt").read_text() == "started\n"  # killed mid-command

    seen: list[ModelRequest] = []
    vibey = _resume(tmp_path, session, seen)
    host = SessionHost(vibey.store, vibey.session_id, vibey, vibey.clock)
    assert vibey.run_turn(host).reply == "checked the log first"

    entries = vibey.store.query(EntryQuery(session))
    notes = [e for e in entries if e.kind == "harness"]
    assert len(notes) == 1, [e.text for e in entries]
    note = notes[0]
    assert "shell" in note.text and "sleep 60" in note.text and "outcome unknown" in note.text
    assert "read_file" not in note.text  # the read reported back before the kill (calls == "two")
    assert note.source.ref == str(next(e.seq for e in entries if e.calls))
    assert not any(e.is_user for e in entries[1:])  # the note is the harness's, never the user's

    request = seen[0].messages
    shown = [m for m in request if m.role == "user" and "did not report back" in m.content]
    assert len(shown) == 1 and shown[0].content.startswith("[Harness: avibe")
    # every call the model made is answered in the request it gets (providers refuse open calls)
    called = [c.id for m in request if m.role == "assistant" for c in m.tool_calls]
    answered = {m.tool_call_id for m in request if m.role == "tool"}
    assert set(called) <= answered
    if calls == "two":
        interrupted = next(m for m in request if m.role == "tool" and m.tool_call_id == "call-shell")
        assert "outcome unknown" in interrupted.content

    # resumed again (another process): the same step is not noted twice
    again = _resume(tmp_path, session, seen)
    host = SessionHost(again.store, again.session_id, again, again.clock)
    host.post(Source("user", name="user"), "go on")
    again.model = ScriptedModel.of([reply("going on")], window=8_000)
    again.run_turn(host)
    assert len([e for e in again.store.query(EntryQuery(session)) if e.kind == "harness"]) == 1


def test_another_agents_finished_steps_are_not_taken_for_interrupted_ones(tmp_path: Path) -> None:
    """item 14: a session Claude Code worked in records its tool calls too; when Vibey takes over
    (`/agent vibey`), those steps finished in their own process and are not noted as interrupted."""
    (tmp_path / "work").mkdir()
    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="switched").id
    store_user = Source("user", name="user")
    deliver(store, session, store_user, "list the files")
    record_reply(store, session, "", agent="claude-code", calls=[CallRecord("Bash", '{"command": "ls"}')])
    record_reply(store, session, "two files", agent="claude-code")
    seen: list[ModelRequest] = []
    vibey = _resume(tmp_path, session, seen)
    deliver(store, session, store_user, "now you")
    vibey.run_turn(SessionHost(store, session, vibey, vibey.clock))
    assert not [e for e in store.query(EntryQuery(session)) if e.kind == "harness"]
