"""Run by test_interrupted_tools.py in a child process: a Vibey session on a real SQLite record whose
model calls `read_file` and then a slow shell command in one step; the test kills this process with
SIGKILL while the command runs (the command touches MARKER first, so the test knows when)."""

from __future__ import annotations

import sys
from pathlib import Path

from vibey_doubles import CharCounter, StepClock

from avibe.agent.loop import RunConfig, Vibey
from avibe.host.session import SessionHost
from avibe.providers.scripted import ScriptedModel, reply
from avibe.record.messages import ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

COMMAND = "echo started >> log.txt; touch {marker}; sleep 60; echo finished >> log.txt"


def main(db: str, workdir: str, session_dir: str, marker: str, calls: str) -> None:
    store = open_store(f"sqlite:///{db}")
    session = store.create_session(title="interrupted")
    toolbox = ToolBox(default_tools(Path(workdir), store=store, session_id=session.id))
    shell = ToolCall("call-shell", "shell", {"command": COMMAND.format(marker=marker)})
    read = ToolCall("call-read", "read_file", {"path": "notes.txt"})
    step = [read, shell] if calls == "two" else [shell]
    vibey = Vibey(
        store=store,
        model=ScriptedModel.of([reply(tool_calls=step), reply("never reached")], window=8_000),
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session.id,
        session_dir=Path(session_dir),
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    print(session.id, flush=True)
    SessionHost(store, session.id, vibey, vibey.clock).send("append to the log, once", "user")


if __name__ == "__main__":
    main(*sys.argv[1:6])
