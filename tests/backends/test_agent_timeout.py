"""`vibe run --agent A --agent-timeout N` is honoured: a program that keeps saying
something - Claude Code says `api_retry` for minutes while a provider is overloaded, which kept the old
silence timer from ever firing (`--agent-timeout 30` returned after 68-85 s) - is stopped once its turn
has taken N seconds, with everything it started, and the harness input says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from avibe.backends.install import installed_bin
from avibe.record.entries import EntryQuery
from avibe.sources.process import process_alive
from avibe.store import open_store

CHATTY = """\
import json, os, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])
with open({pids!r}, "w") as out:
    out.write(f"{{os.getpid()}} {{child.pid}}")
for attempt in range(1, 10_000):  # as Claude Code retries an overloaded provider: a line every beat
    retry = {{"type": "system", "subtype": "api_retry", "attempt": attempt, "error_status": 529}}
    print(json.dumps(retry), flush=True)
    time.sleep(0.3)
"""


def test_agent_timeout_stops_a_program_that_keeps_talking(tmp_path: Path) -> None:
    home, work, pids = tmp_path / "home", tmp_path / "work", tmp_path / "agent.pids"
    work.mkdir()
    program = installed_bin(home) / "claude"
    program.parent.mkdir(parents=True)
    program.write_text(f"#!{sys.executable}\n" + CHATTY.format(pids=str(pids)))
    program.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")} | {"AVIBE_HOME": str(home)}
    command = [sys.executable, "-c", "from avibe.cli import main; main()", "run", "--agent", "claude-code"]
    try:
        done = subprocess.run(
            [*command, "--agent-timeout", "3", "go"], env=env, cwd=work, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError("--agent-timeout 3 did not stop a program that keeps talking") from None
    assert done.returncode == 1, done.stderr + done.stdout
    assert not any(process_alive(int(pid)) for pid in pids.read_text().split()), "the program still runs"
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        session = store.list_sessions()[0].id
        notice = store.query(EntryQuery(session))[-1]
    assert notice.kind == "harness" and notice.source.name == "claude-code"
    assert "did not finish within the 3 seconds a turn may take and was stopped" in notice.text, notice.text
