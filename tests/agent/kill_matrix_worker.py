"""Run by test_kill_matrix.py in a child process: a hosted Vibey session on a real SQLite record that
kills itself with SIGKILL at one effect point, named by KILL_AT ("kind:n": the n-th event of that kind;
"checkpoint>kind:n": the n-th after the first checkpoint; "question:n": inside the n-th checkpoint
question's model call). Prints each user message just before it is sent."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from vibey_doubles import BEFORE_STEPS, CharCounter, StepClock, answer, tool_step

from avibe.agent.loop import RunConfig, Vibey
from avibe.host import SessionHost
from avibe.host.events import Event
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

MESSAGES = ("first: read a.txt", "second: read b.txt", "third: read c.txt", "fourth: read d.txt")


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class Killer:
    def __init__(self, spec: str) -> None:
        self.after_checkpoint = spec.startswith("checkpoint>")
        kind, _, n = spec.removeprefix("checkpoint>").partition(":")
        self.kind, self.n, self.seen, self.armed = kind, int(n or 0), 0, not self.after_checkpoint

    def __call__(self, event: Event) -> None:
        if event.kind == "checkpoint":
            self.armed = True
        if self.armed and event.kind == self.kind:
            self.seen += 1
            if self.seen == self.n:
                _die()

    def question(self, request: ModelRequest) -> Any:
        if self.kind == "question":
            self.seen += 1
            if self.seen == self.n:
                _die()
        return answer(request)


def main(db: str, workdir: str, session_dir: str, spec: str) -> None:
    killer = Killer(spec)
    store = open_store(f"sqlite:///{db}")
    session = store.create_session(title="kill matrix")
    toolbox = ToolBox(default_tools(Path(workdir), store=store, session_id=session.id))
    steps = [
        *BEFORE_STEPS,
        tool_step("read_file", path="c.txt"),
        *[killer.question] * 5,
        reply("c read"),
        tool_step("read_file", path="d.txt"),
        reply("d read"),
    ]
    vibey = Vibey(
        store=store,
        model=ScriptedModel.of(steps, window=8_000, max_output=1_000),
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session.id,
        session_dir=Path(session_dir),
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )
    host = SessionHost(store, session.id, vibey, StepClock(), killer)
    print(session.id, flush=True)
    for text in MESSAGES:
        print(f"sending {text}", flush=True)
        host.send(text, "user")
    print("finished", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
