"""OpenCode as it is (SPEC L5): `opencode run --format json`, one process per turn, the prompt on
standard input; `--session <id>` continues the conversation (across a restart of Avibe too: OpenCode keeps
its sessions in its data dir). It uses the model and providers the user configured for it (opencode.json,
OPENCODE_CONFIG, `opencode auth login`) and compacts on its own."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from avibe.backends.base import (
    Activity,
    BackendFailed,
    Launch,
    Outcome,
    ToolDone,
    ToolUse,
    error_reason,
    exit_reason,
)

FLAGS: Final = ("run", "--format", "json")


def _reason(state: Mapping[str, Any], output: str) -> str:
    """Why the tool failed ("" when it did not): the error of a call in the `error` state (a refused
    permission), or a shell command's exit code (it reports those as `completed` with `metadata.exit`)."""
    if state.get("status") == "error":
        return error_reason(str(state.get("error") or output)) or "failed"
    metadata = state.get("metadata")
    code = metadata.get("exit") if isinstance(metadata, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return exit_reason(code, output)
    return ""


@dataclass
class OpenCodeReader:
    """Reads `opencode run --format json` lines: step_start, text, tool_use, step_finish, error."""

    session: str
    calls: list[ToolUse] = field(default_factory=list)
    texts: dict[str, list[str]] = field(default_factory=dict)  # message id -> its text parts
    last_message: str = ""
    error: str = ""

    def feed(self, event: Mapping[str, Any]) -> list[Activity]:
        self.session = str(event.get("sessionID") or self.session)
        kind, part = event.get("type"), event.get("part")
        if kind == "error":
            error = event.get("error")
            data = error.get("data") if isinstance(error, dict) else None
            message = data.get("message") if isinstance(data, dict) else None
            self.error = str(message or json.dumps(error))
            return []
        if not isinstance(part, dict):
            return []
        if kind == "text":
            message_id = str(part.get("messageID", ""))
            self.texts.setdefault(message_id, []).append(str(part.get("text", "")))
            self.last_message = message_id
        if kind == "tool_use":
            return self._tool(part)
        return []

    def _tool(self, part: Mapping[str, Any]) -> list[Activity]:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        arguments = state.get("input") if isinstance(state.get("input"), dict) else {}
        use = ToolUse(str(part.get("callID", "")), str(part.get("tool", "")), arguments or {})
        self.calls.append(use)
        output = str(state.get("output") or state.get("error") or "")
        reason = _reason(state, output)
        return [use, ToolDone(use.call_id, use.name, bool(reason), len(output), reason)]

    def problem(self) -> str:
        return self.error

    def outcome(self) -> Outcome:
        if self.error:
            raise BackendFailed(f"reported an error: {self.error}")
        if not self.session:
            raise BackendFailed("ended without starting a session")
        reply = "".join(self.texts.get(self.last_message, []))
        return Outcome(reply, self.session, tuple(self.calls))


@dataclass(frozen=True)
class OpenCode:
    name: str = "opencode"
    label: str = "OpenCode"
    program: str = "opencode"
    package: str = "opencode-ai"

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch:
        which = ("--session", session) if session else ()
        return Launch((*FLAGS, "--dir", str(workdir), *which), prompt, {"PWD": str(workdir)})

    def reader(self, session: str) -> OpenCodeReader:
        return OpenCodeReader(session)

    def auth_hint(self) -> str:
        return "Log in with `opencode auth login`, or set the provider's key (e.g. ANTHROPIC_API_KEY)."
