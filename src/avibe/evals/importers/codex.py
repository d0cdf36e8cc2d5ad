"""Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines {timestamp, type, payload};
messages and tool calls come from `response_item` payloads; `event_msg` lines repeat them for the UI,
except the user_message events, which name what the person typed."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from avibe.evals.importers.forms import CODEX_FORMS, element, form_of
from avibe.evals.importers.reading import (
    AGENT_NAMES,
    Collector,
    Imported,
    as_name,
    content_blocks,
    finish,
    json_lines,
    parse_time,
    shown,
)


def _codex_arguments(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return {"input": raw}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {}


def _codex_output(raw: object) -> str:
    """function_call_output.output: plain text, or JSON {"output": ..., "metadata": ...} in some versions."""
    if isinstance(raw, Mapping):
        return str(raw.get("content", raw.get("output", "")))
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        if isinstance(parsed, dict) and "output" in parsed:
            return str(parsed["output"])
    return str(raw)


def _said(text: str) -> str:
    """A text as compared with what Codex says the person typed: whitespace at the ends does not count."""
    return text.strip()


def _codex_user_block(c: Collector, text: str, at: datetime, typed: Counter[str] | None) -> str:
    """The person's words in one block of a user-role message, "" when it holds none. When the file
    says what the person typed (`event_msg` user_message), a block is theirs exactly when it is one of
    those; otherwise it is decided by the forms Codex writes (CODEX_FORMS)."""
    form, action = form_of(CODEX_FORMS, text)
    if typed is not None and typed[_said(text)] > 0:
        typed[_said(text)] -= 1
        return text
    if action == "command":
        c.did(form, _codex_command(text, form), at)
    elif action == "words" and typed is None:
        return text
    elif action == "words" and text.strip():  # the file says the person did not type it
        c.did("injected", text, at)
    return ""


def _codex_command(text: str, form: str) -> str:
    return f"! {element(text, 'command')}" if form == "shell-command" else text.strip()


def _codex_item(c: Collector, item: Mapping[str, Any], at: datetime, typed: Counter[str] | None) -> None:
    kind = as_name(item.get("type"))
    if kind == "message":
        content = content_blocks(c, item.get("content"), str(item.get("role", "message")))
        blocks = [content] if isinstance(content, str) else [str(b.get("text", "")) for b in content]
        if item.get("role") == "user":  # each block on its own: Codex puts context beside the words
            words = [_codex_user_block(c, text, at, typed) for text in blocks]
            c.say("\n".join(w for w in words if w.strip()), at)
        elif item.get("role") == "assistant":
            c.text(at, "\n".join(blocks))
    elif kind in {"function_call", "custom_tool_call"}:
        raw = item.get("arguments", item.get("input"))
        c.call(at, str(item.get("call_id", "")), str(item.get("name", "tool")), _codex_arguments(raw))
    elif kind in {"function_call_output", "custom_tool_call_output"}:
        c.output(str(item.get("call_id", "")), _codex_output(item.get("output")))


def _codex_typed(lines: list[tuple[int, dict[str, Any]]]) -> Counter[str] | None:
    """What the person typed, as the file's `event_msg` user_message events say (each text as often as
    it was typed), or None when the file has no such events (older Codex versions)."""
    typed: Counter[str] = Counter()
    for _, data in lines:
        payload = data.get("payload")
        if data.get("type") != "event_msg" or not isinstance(payload, Mapping):
            continue
        if payload.get("type") == "user_message" and isinstance(payload.get("message"), str):
            typed[_said(payload["message"])] += 1
    return typed if typed else None


def parse_codex(path: Path, user: str) -> Imported:
    c, origin = Collector(user, AGENT_NAMES["codex"]), ""
    lines = list(json_lines(path))
    typed = _codex_typed(lines)
    for number, data in lines:
        payload = data.get("payload")
        if not isinstance(payload, Mapping):
            continue
        c.where = f"{shown(path)}:{number}"
        if data.get("type") == "session_meta":
            origin = str(payload.get("id", ""))
        elif data.get("type") == "response_item":
            _codex_item(c, payload, parse_time(data.get("timestamp")), typed)
    return finish(c, path, "codex", origin)
