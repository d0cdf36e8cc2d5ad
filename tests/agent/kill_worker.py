"""Run by test_kill.py in a child process: Vibey on a real SQLite record, killed with SIGKILL in the
middle of a checkpoint turn (the scripted model blocks on its first checkpoint question)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from vibey_doubles import BEFORE_STEPS, CharCounter, StepClock, send, tool_step

from avibe.agent.loop import RunConfig, Vibey
from avibe.providers.scripted import ScriptedModel
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools


def main(db: str, workdir: str, session_dir: str, marker: str) -> None:
    def block(_: Any) -> Any:
        Path(marker).write_text("in checkpoint")
        time.sleep(120)  # killed long before this ends
        raise AssertionError("the parent should have killed this process")

    store = open_store(f"sqlite:///{db}")
    session = store.create_session(title="kill")
    toolbox = ToolBox(default_tools(Path(workdir), store=store, session_id=session.id))
    model = ScriptedModel.of(
        [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), block], window=8_000, max_output=1_000
    )
    vibey = Vibey(
        store=store,
        model=model,
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session.id,
        session_dir=Path(session_dir),
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    print(session.id, flush=True)
    for text in ("first: read a.txt", "second: read b.txt", "third: read c.txt"):
        send(vibey, text)


if __name__ == "__main__":
    main(*sys.argv[1:5])
