"""Codex as it is (SPEC L5): `codex exec --json`, one process per turn, the prompt on standard input;
`codex exec resume <thread id>` continues the conversation (across a restart of Avibe too: Codex keeps
its sessions in CODEX_HOME). It uses the model, provider and sandbox the user configured for it
(~/.codex/config.toml, CODEX_HOME, OPENAI_API_KEY) and compacts on its own."""

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

FLAGS: Final = ("exec", "--json", "--skip-git-repo-check")
# Codex's item types that are tool calls, and the fields that say what each did
TOOL_ITEMS: Final = {
    "command_execution": ("command",),
    "file_change": ("changes",),
    "mcp_tool_call": ("server", "tool", "arguments"),
    "web_search": ("query",),
}


def _tool(item: Mapping[str, Any]) -> ToolUse:
    kind = str(item.get("type"))
    name = f"{item.get('server')}.{item.get('tool')}" if kind == "mcp_tool_call" else kind
    arguments = {key: item[key] for key in TOOL_ITEMS[kind] if key in item}
    return ToolUse(str(item.get("id", "")), name, arguments)


def _reason(item: Mapping[str, Any]) -> str:
    """Why a failed item failed: a command's exit code and last output line, else the error it carries
    (an MCP tool's `error.message`)."""
    output = item.get("aggregated_output")
    if item.get("exit_code") not in (None, 0):
        return exit_reason(item.get("exit_code"), output if isinstance(output, str) else "")
    error = item.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    if isinstance(message, str) and message:
        return error_reason(message)
    return error_reason(output) if isinstance(output, str) else ""


@dataclass
class CodexReader:
    """Reads `codex exec --json` lines: thread.started, item.started / item.completed, turn.* ."""

    session: str
    calls: list[ToolUse] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    reply: str = ""
    error: str = ""
    last_error: str = ""  # an `error` line (Codex says "Reconnecting..." this way too)
    completed: bool = False

    def feed(self, event: Mapping[str, Any]) -> list[Activity]:
        kind = event.get("type")
        if kind == "thread.started":
            self.session = str(event.get("thread_id") or self.session)
        elif kind == "turn.completed":
            self.completed = True
        elif kind == "error":
            self.last_error = str(event.get("message", ""))
        elif kind == "turn.failed":
            error = event.get("error")
            self.error = str(error.get("message") if isinstance(error, dict) else error)
        item = event.get("item")
        if kind in ("item.started", "item.completed") and isinstance(item, dict):
            return self._item(item, done=kind == "item.completed")
        return []

    def _item(self, item: Mapping[str, Any], *, done: bool) -> list[Activity]:
        kind = item.get("type")
        if kind == "agent_message" and done:
            self.reply = str(item.get("text", ""))
        if kind not in TOOL_ITEMS:
            return []
        use = _tool(item)
        found: list[Activity] = []
        if use.call_id not in self.started:
            self.started.add(use.call_id)
            self.calls.append(use)
            found.append(use)
        if done:
            failed = item.get("status") == "failed" or item.get("exit_code") not in (None, 0)
            output = item.get("aggregated_output") or item.get("result") or ""
            chars = len(output) if isinstance(output, str) else len(json.dumps(output))
            found.append(ToolDone(use.call_id, use.name, failed, chars, _reason(item) if failed else ""))
        return found

    def problem(self) -> str:
        return self.error or self.last_error

    def outcome(self) -> Outcome:
        if self.error:
            raise BackendFailed(f"reported an error: {self.error}")
        if not self.completed:
            raise BackendFailed("ended without finishing its turn")
        return Outcome(self.reply, self.session, tuple(self.calls))


@dataclass(frozen=True)
class Codex:
    name: str = "codex"
    label: str = "Codex"
    program: str = "codex"
    package: str = "@openai/codex"

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch:
        which = ("resume", session, "-") if session else ("-",)
        return Launch((*FLAGS, *which), prompt, {"PWD": str(workdir)})

    def reader(self, session: str) -> CodexReader:
        return CodexReader(session)

    def auth_hint(self) -> str:
        return "Log in with `codex login`, or set OPENAI_API_KEY (or the env_key of your model_provider)."
