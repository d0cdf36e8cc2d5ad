"""Kill -9 at every effect point of a turn and of a checkpoint (C1, N6, F4, F5).

Whatever point the process dies at, the resumed session holds every recorded entry once, its view never
holds a moved-out message next to the checkpoint that moved it (the reported hole: a kill during the
first model call after a checkpoint resumed with the recollection AND messages #1-#3), every user
message the checkpoint moved out is in its memo or dismissed (N6), and the work goes on to the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kill_matrix_worker import MESSAGES
from vibey_doubles import CharCounter, StepClock, answer, write_lines

from avibe.agent import live
from avibe.agent.loop import RunConfig, Vibey
from avibe.host import SessionHost
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import EntryQuery
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

HERE = Path(__file__).parent
KILL_POINTS = [
    "input:1",  # the first user message recorded, its turn not started
    "model_started:1",  # before the first model call
    "model_call:1",  # the model answered; its reply not yet recorded
    "tool_call:1",  # before the tool runs
    "tool_result:1",  # the tool ran; the live state not yet saved
    "turn_ended:2",  # after the second turn's state was saved
    "checkpoint_started:1",  # the checkpoint is about to run
    "question:2",  # inside the checkpoint turn's second model call
    "checkpoint:1",  # the checkpoint and its live state committed
    "checkpoint>model_started:1",  # the first model call after the checkpoint (the reported hole)
    "checkpoint>model_call:1",
    "checkpoint>tool_result:1",
]


def _run_worker(tmp: Path, spec: str) -> tuple[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, str(HERE / "kill_matrix_worker.py"), str(tmp / "avibe.db"), str(tmp / "work")]
    args += [str(tmp / "sess"), spec]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (
        f"{spec}: not killed ({proc.returncode}): {proc.stderr[-2000:]}"
    )
    lines = proc.stdout.split("\n")
    return lines[0].strip(), [line.removeprefix("sending ") for line in lines if line.startswith("sending ")]


def _responder(request: ModelRequest) -> Any:
    return answer(request) if request.json_schema is not None else reply("done")


def _resumed(tmp: Path, session: str) -> tuple[Vibey, SessionHost]:
    store = open_store(f"sqlite:///{tmp / 'avibe.db'}")
    toolbox = ToolBox(default_tools(tmp / "work", store=store, session_id=session))
    vibey = Vibey(
        store=store,
        model=ScriptedModel.of([_responder] * 60, window=8_000, max_output=1_000),
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session,
        session_dir=tmp / "sess",
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    return vibey, SessionHost(store, session, vibey, StepClock())


def _check_view(vibey: Vibey, host: SessionHost) -> None:
    """The resumed live context against the record and the latest checkpoint."""
    store, session = vibey.store, vibey.session_id
    state = vibey.load_state()
    state = live.absorb(state, host.after(state.last_seq), vibey.name, vibey.record.note_interrupted)
    entries = store.query(EntryQuery(session))
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))  # dense: nothing lost
    seqs = [m.seq for m in state.messages if m.seq is not None]
    assert len(seqs) == len(set(seqs)), f"a message twice in the view: {seqs}"
    checkpoints = store.list_checkpoints(session)
    upto = checkpoints[-1].upto_seq if checkpoints else 0
    pinned = set(state.turn_user_seqs)
    assert all(s > upto or s in pinned for s in seqs), (
        f"moved-out messages back in the view: {seqs}, upto {upto}"
    )
    # every newer entry is in the view (a tool-calls-only reply whose results died with the process is not)
    assert {e.seq for e in entries if e.seq > upto and e.text.strip()} <= set(seqs)
    if checkpoints:  # N6: each moved-out user message is in the memo, dismissed, or still pinned
        memo = {item.seq for item in checkpoints[-1].memo}
        for entry in entries:
            if entry.is_user and entry.seq <= upto:
                assert entry.seq in memo | set(state.dismissed) | pinned, f"user message #{entry.seq} lost"


@pytest.mark.slow
@pytest.mark.parametrize("spec", KILL_POINTS)
def test_C1_N6_kill_9_at_every_effect_point_resumes_exactly(tmp_path: Path, spec: str) -> None:
    work = tmp_path / "work"
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90), ("d.txt", 20)):
        write_lines(work, name, lines)
    session, sent = _run_worker(tmp_path, spec)
    vibey, host = _resumed(tmp_path, session)
    _check_view(vibey, host)

    host.run_until_idle()  # an input that was recorded but not yet answered is answered now
    for text in MESSAGES[len(sent) :]:
        host.send(text, "user")
    _check_view(vibey, host)
    entries = vibey.store.query(EntryQuery(session))
    assert [e.text for e in entries if e.is_user] == list(MESSAGES)  # each once, in order
    assert entries[-1].kind == "assistant"  # the last message was answered
