"""The session's stop switch (the chat's Ctrl-C) stops the real Claude Code, Codex and
OpenCode while they work - here waiting on the scripted provider, which holds their request - at once:
the turn ends as BackendStopped and nothing of the program's process group is left running."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from test_backend_contract import BACKENDS_BY_NAME, Rig, rig  # noqa: F401 - `rig` is the fixture

from avibe.backends.base import BackendError, BackendStopped, run_program
from avibe.sources.process import group_alive

pytestmark = pytest.mark.slow


def test_the_stop_switch_kills_the_real_program_and_its_group(
    rig: Rig,  # noqa: F811 - the contract tests' fixture, imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [k for k in os.environ if k.startswith(("AVIBE_", "ANTHROPIC_", "OPENAI_", "CODEX_"))]:
        monkeypatch.delenv(name)
    for name, value in rig.env.items():
        monkeypatch.setenv(name, value)  # the program's environment is the person's (program_env)
    backend = BACKENDS_BY_NAME[rig.agent]
    found = shutil.which(backend.program, path=rig.env["PATH"])
    assert found is not None
    rig.provider.hold, _ = threading.Event(), rig.provider.arrived.clear()
    stop, started, ended = threading.Event(), [], []

    def turn() -> None:
        try:
            run_program(backend, Path(found), "hello", session="", workdir=rig.tmp / "work", stop=stop,
                        on_start=started.append)  # fmt: skip
        except BackendError as exc:
            ended.append(exc)

    worker = threading.Thread(target=turn, daemon=True)
    worker.start()
    try:
        assert rig.provider.arrived.wait(120), "the program's request never came"
        stop.set()
        worker.join(30)
        assert not worker.is_alive(), "the turn did not end when the stop switch was set"
    finally:
        rig.provider.hold.set()
    assert len(ended) == 1 and isinstance(ended[0], BackendStopped), ended
    assert "stopped by the user (Ctrl-C)" in str(ended[0])
    assert not group_alive(started[0]), "something of the program's process group still runs"
