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

BACKENDS: Final[tuple[Backend, ...]] = (ClaudeCode(), Codex(), OpenCode())


def backend_named(name: str) -> Backend:
    """The backend called `name` (claude-code, codex, opencode); BackendError lists the names otherwise."""
    for backend in BACKENDS:
        if backend.name == name:
            return backend
    names = ", ".join(b.name for b in BACKENDS)
    raise BackendError(
        f"no agent backend is called {name!r}; the backends are {names} (and vibey, Avibe's own)"
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
