"""Run by test_full_disk.py in a private mount namespace with a small tmpfs at DIR: a hosted Vibey
session whose record lives on that tmpfs; the scripted model fills the disk while it "thinks", then
streams its reply. Prints what `vibe run` prints (its EventPrinter), then a last line
`RESULT <json>` with how the turn ended."""

from __future__ import annotations

import errno
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from vibey_doubles import CharCounter, StepClock

from avibe.agent.loop import RunConfig, Vibey
from avibe.cli.terminal import EventPrinter
from avibe.host import SessionHost
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import EntryQuery
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools

REPLY = "Here is the whole answer you asked for, streamed to your screen. " * 40


def fill(folder: Path) -> None:
    """Write until the filesystem says it is full (a real ENOSPC, not a simulated one)."""
    block = b"x" * 65_536
    with (folder / "filler").open("ab") as out:
        try:
            while True:
                out.write(block)
                out.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


def main(folder: str) -> None:
    root = Path(folder)
    store = open_store(f"sqlite:///{root / 'avibe.db'}")
    session = store.create_session(title="full disk").id
    work = root / "work"
    work.mkdir()
    toolbox = ToolBox(default_tools(work, store=store, session_id=session))

    def think(request: ModelRequest) -> object:
        fill(root)
        return reply(REPLY)

    vibey = _vibey(store, session, root, toolbox, [think])
    host = SessionHost(store, session, vibey, StepClock(), EventPrinter())
    outcome: dict[str, object] = {"session": session}
    try:
        result = host.send("write me the long answer", "user")
        outcome |= {"stopped": result.stopped, "reply": result.reply}
    except Exception as exc:  # what escapes reaches the CLI's error line (or a traceback)
        outcome |= {"raised": type(exc).__name__, "message": str(exc)}
    (root / "filler").unlink()  # the person frees space and goes on
    outcome["integrity"] = _integrity(root / "avibe.db")
    again = open_store(f"sqlite:///{root / 'avibe.db'}")
    resumed = _vibey(again, session, root, toolbox, [reply("short answer")])
    outcome["resumed"] = SessionHost(again, session, resumed, StepClock()).send("go on", "user").reply
    outcome["entries"] = [[e.kind, e.text[:40]] for e in again.query(EntryQuery(session))]
    print(f"RESULT {json.dumps(outcome)}", flush=True)


def _vibey(store: Any, session: str, root: Path, toolbox: ToolBox, steps: list[Any]) -> Vibey:
    return Vibey(
        store=store,
        model=ScriptedModel.of(steps, window=32_000),
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session,
        session_dir=root / "sess",
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured"),
    )


def _integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


if __name__ == "__main__":
    main(sys.argv[1])
