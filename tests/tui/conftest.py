"""The chat's pilot tests: a home (AVIBE_HOME) whose record the scripted sessions and the in-process `vibe`
commands share, and `make_chat` to build the app on a scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from chat_doubles import GatedModel, Sessions

from avibe.cli.chat import VibeCommands
from avibe.config import load_settings
from avibe.providers.scripted import Step
from avibe.tui.app import ChatApp

MODEL = "openai/gpt-4o"  # the name the chat shows; the sessions run the scripted model


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    for name in ("AVIBE_DATABASE_URL", "AVIBE_MODEL", "AVIBE_APPROVAL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AVIBE_HOME", str(folder))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-avibe-test-dummy")
    return folder


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def make_chat(home: Path, workdir: Path) -> Callable[..., tuple[ChatApp, Sessions]]:
    def make(
        steps: Sequence[Step] | GatedModel,
        *,
        session_id: str | None = None,
        approval: str = "auto",
        window: int = 8_000,
        sessions: Sessions | None = None,
    ) -> tuple[ChatApp, Sessions]:
        model = steps if isinstance(steps, GatedModel) else GatedModel(steps, window=window, max_output=1_000)
        opener = sessions or Sessions(home, workdir, model, approval)
        if sessions is not None:
            sessions.model = model
        app = ChatApp(
            opener, VibeCommands(load_settings()), model=MODEL, session_id=session_id, workdir=workdir
        )
        return app, opener

    return make
