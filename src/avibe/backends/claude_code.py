"""Claude Code as it is (SPEC L5): `claude -p --input-format stream-json --output-format stream-json`,
one process per turn; `--session-id` names a new conversation, `--resume` continues it (across a restart
of Avibe too: Claude Code keeps the transcript). It uses the model, key and settings the user configured
for it (ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL / its login) and compacts on its own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from avibe.backends.base import Activity, BackendFailed, Launch, Outcome, ToolDone, ToolUse, error_reason

AUTH_ERRORS: Final = frozenset({"authentication_failed", "permission_error", "billing_error"})
FLAGS: Final = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


@dataclass
class ClaudeReader:
    """Reads Claude Code's stream-json lines: tool_use / tool_result blocks, then one `result`."""

    session: str
    calls: list[ToolUse] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    result: Mapping[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> list[Activity]:
        self.session = str(event.get("session_id") or self.session)
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "api_retry" and event.get("error") in AUTH_ERRORS:
            # Claude Code retries a refused key for minutes; it will not succeed
            status = f"{event.get('error_status')} {event.get('error')}"
            raise BackendFailed(f"was refused by the model provider ({status})")
        if kind == "result":
            self.result = event
            return []
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind not in ("assistant", "user") or not isinstance(content, list):
            return []
        return [found for block in content if isinstance(block, dict) for found in self._block(block)]

    def _block(self, block: Mapping[str, Any]) -> list[Activity]:
        if block.get("type") == "tool_use":
            arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
            use = ToolUse(str(block.get("id", "")), str(block.get("name", "")), arguments or {})
            self.names[use.call_id] = use.name
            self.calls.append(use)
            return [use]
        if block.get("type") == "tool_result":
            call_id = str(block.get("tool_use_id", ""))
            output, failed = _text(block.get("content")), bool(block.get("is_error"))
            reason = error_reason(output) if failed else ""  # a refused permission says so here
            return [ToolDone(call_id, self.names.get(call_id, ""), failed, len(output), reason)]
        return []

    def problem(self) -> str:
        if self.result is None:
            return ""
        if not self.result.get("is_error") and self.result.get("subtype") in (None, "success"):
            return ""
        text = self.result.get("result")
        if isinstance(text, str) and text:
            return text
        return json.dumps(self.result.get("errors") or self.result.get("subtype"))

    def outcome(self) -> Outcome:
        if self.result is None:
            raise BackendFailed("ended without a result")
        if self.problem():
            raise BackendFailed(f"reported an error: {self.problem()}")
        text = self.result.get("result")
        return Outcome(text if isinstance(text, str) else "", self.session, tuple(self.calls))


@dataclass(frozen=True)
class ClaudeCode:
    name: str = "claude-code"
    label: str = "Claude Code"
    program: str = "claude"
    package: str = "@anthropic-ai/claude-code"

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch:
        which = ("--resume", session) if session else ("--session-id", str(uuid.uuid4()))
        message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}}
        return Launch((*FLAGS, *which), json.dumps(message, ensure_ascii=False) + "\n", {"PWD": str(workdir)})

    def reader(self, session: str) -> ClaudeReader:
        return ClaudeReader(session)

    def auth_hint(self) -> str:
        return (
            "Log in by running `claude` once, or set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy)."
        )
