"""Kill -9 during a checkpoint: no record entry is lost; the session resumes and checkpoints again (C1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vibey_doubles import checkpoint_steps, go_on, write_lines

from avibe.agent.state import STATE_KEY
from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery

HERE = Path(__file__).parent


def _wait_for(path: Path, proc: subprocess.Popen[str], log: Path, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError("worker never reached the checkpoint")
        time.sleep(0.05)


def test_C1_kill_9_during_a_checkpoint_loses_nothing_and_resumes(tmp_path: Path, make_harness: Any) -> None:
    work = tmp_path / "work"
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(work, name, lines)
    db, marker = tmp_path / "avibe.db", tmp_path / "in-checkpoint"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = [
        sys.executable,
        str(HERE / "kill_worker.py"),
        str(db),
        str(work),
        str(tmp_path / "sess"),
        str(marker),
    ]
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_for(marker, proc, log)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == -signal.SIGKILL
    session = log.read_text().split()[0]

    h = make_harness([*checkpoint_steps(5), reply("c read")], session=session, db=db)
    entries = h.store.query(EntryQuery(session))
    texts = [e.text for e in entries if e.text]  # tool-calling replies are entries too, with their calls
    assert texts == ["first: read a.txt", "a read", "second: read b.txt", "b read", "third: read c.txt"]
    assert [e.seq for e in entries] == list(range(1, 9))  # dense, nothing lost
    assert [c.name for e in entries for c in e.calls] == ["read_file"] * 3
    saved = h.store.load_state(session, STATE_KEY)
    assert saved is not None and saved["checkpointing"] is True  # it died inside the checkpoint
    assert h.checkpoints() == []

    result = go_on(h.vibey)  # the same turn goes on: checkpoint again, then the model answers
    h.model.assert_consumed()
    assert result.reply == "c read" and result.checkpoints == 1
    assert [c.number for c in h.checkpoints()] == [1]
    assert [e.seq for e in h.store.query(EntryQuery(session))] == list(range(1, 10))
