"""External agents run as they are (L5), but not over Avibe's record: the program Avibe starts
for Claude Code, Codex or OpenCode keeps the person's environment - its keys and settings - without
Avibe's own variables, so its shell cannot find the home or read a database URL with a password and write
`user` rows. A real child process through `run_program`, the path every backend takes."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from avibe.backends.base import Activity, Launch, Outcome, run_program

PRINT_ENV = "import json, os; print(json.dumps({'reply': dict(os.environ)}))"


class EnvReader:
    def __init__(self) -> None:
        self.env: dict[str, str] = {}

    def feed(self, event: Mapping[str, Any]) -> list[Activity]:
        self.env = dict(event["reply"])
        return []

    def outcome(self) -> Outcome:
        return Outcome(json.dumps(self.env), "")

    def problem(self) -> str:
        return ""


class EnvBackend:
    """A stand-in agent program: python printing its environment as one JSON line."""

    name, label, program, package = "env-agent", "Env agent", "python", "none"

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch:
        return Launch(("-c", PRINT_ENV), env={"AGENT_OWN": "1"})

    def reader(self, session: str) -> EnvReader:
        return EnvReader()

    def auth_hint(self) -> str:
        return ""


def test_an_external_agent_never_gets_avibes_home_or_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AVIBE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AVIBE_DATABASE_URL", "postgresql+psycopg://avibe:SECRET-PW@db/avibe")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-the-agents-own-key")
    outcome = run_program(EnvBackend(), Path(sys.executable), "hi", session="", workdir=tmp_path)
    env = json.loads(outcome.reply)
    assert not [key for key in env if key.startswith("AVIBE_")]
    assert "SECRET-PW" not in json.dumps(env)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-the-agents-own-key"  # its own key: it runs as it is
    assert env["AGENT_OWN"] == "1"
