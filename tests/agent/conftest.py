"""Vibey end to end: the `make_harness` fixture (see vibey_doubles.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from vibey_doubles import CharCounter, Harness, StepClock

from avibe.agent.loop import RunConfig, Vibey
from avibe.host.events import Event
from avibe.providers.scripted import ScriptedModel, Step
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., Harness]:
    def make(
        steps: Sequence[Step],
        *,
        window: int = 8_000,
        mode: str = "structured",
        session: str | None = None,
        db: Path | None = None,
        max_steps: int = 30,
        compaction: str = "checkpoint",
        agents_md: str = "",
    ) -> Harness:
        store = open_store(f"sqlite:///{db or tmp_path / 'avibe.db'}")
        info = store.get_session(session) if session else store.create_session(title="e2e")
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        toolbox = ToolBox(default_tools(workdir, store=store, session_id=info.id))
        model = ScriptedModel.of(steps, window=window, max_output=1_000)
        events: list[Event] = []
        vibey = Vibey(
            store=store,
            model=model,
            counter=CharCounter(),
            clock=StepClock(),
            session_id=info.id,
            session_dir=tmp_path / "sessions" / info.id,
            tool_specs=toolbox.specs,
            run_tool=toolbox.dispatch,
            config=RunConfig(
                checkpoint_mode=mode,  # type: ignore[arg-type]
                max_steps=max_steps,
                compaction=compaction,
                agents_md=agents_md,
            ),
            events=events.append,
        )
        return Harness(vibey, model, store, workdir, events)

    return make
