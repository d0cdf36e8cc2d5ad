"""External agents run as they are (SPEC L5), with source-tagged input (T3): Claude Code, Codex and
OpenCode. Adapter layer: each backend describes its program (how to launch a turn, how to read its JSON
event lines); `base.run_program` runs it. The host's `BackendAgent` (`avibe.host.backend_agent`) runs
it as the session's Agent, records its replies and posts its failures as harness inputs."""

from __future__ import annotations

from typing import Final

from avibe.backends.base import (
    Activity,
    Backend,
    BackendError,
    BackendFailed,
    BackendTimedOut,
    Outcome,
    ProgramMissing,
    ToolDone,
    ToolUse,
    run_program,
)
from avibe.backends.claude_code import ClaudeCode
from avibe.backends.codex import Codex
from avibe.backends.opencode import OpenCode
from avibe.record.agents import VIBEY, external_names

# one adapter for each external agent of the registry (`avibe.record.agents`), in its order
BACKENDS: Final[tuple[Backend, ...]] = (ClaudeCode(), Codex(), OpenCode())


def backend_named(name: str) -> Backend:
    """The backend called `name` (an external agent of the registry); BackendError lists the names
    otherwise."""
    for backend in BACKENDS:
        if backend.name == name:
            return backend
    raise BackendError(
        f"no agent backend is called {name!r}; the backends are {external_names('and')} (and {VIBEY}, "
        "Avibe's own)"
    )


__all__ = [
    "BACKENDS",
    "Activity",
    "Backend",
    "BackendError",
    "BackendFailed",
    "BackendTimedOut",
    "Outcome",
    "ProgramMissing",
    "ToolDone",
    "ToolUse",
    "backend_named",
    "run_program",
]
