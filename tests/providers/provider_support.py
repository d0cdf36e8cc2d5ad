"""Shared test support for the provider tests (a module of its own: `from conftest import` is ambiguous
when several test folders run in one pytest call)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
DUMMY_KEY = "sk-avibe-test-dummy-key-never-recorded"


def fixture_response(name: str) -> tuple[int, dict[str, Any]]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return int(data["status"]), data["body"]


@dataclass
class WireServer:
    """Serves queued (status, JSON body) responses to any POST and records what it received."""

    url: str
    responses: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def queue(self, *names: str) -> None:
        self.responses.extend(fixture_response(n) for n in names)
