"""Craft Agents sessions (`<workspace>/sessions/<id>/session.jsonl`; docs/eval-format.md): a first line
describing the session (`sdkSessionId`, `workspaceRootPath`, ...), then one line per message: {id, type,
content, timestamp (milliseconds), order} with type "user" (what the person typed), "assistant" (a reply,
`isIntermediate` while the turn goes on), "tool" (one call and its result: `toolName`, `toolUseId`,
`toolInput`, `toolResult`, `isError`), "plan" (the agent's plan, shown to the person), "info" (Craft's
own notes: an interruption, "Compacted Conversation") and "auth-request" (a credential prompt).

Lines are read in the order Craft shows them (`order`, where a line has one; a tool line is written
before the reply text that introduced it). A user line that is one slash command (`/compact`) is what the
person did through the agent, recorded as its input (N7); info and auth-request lines are Craft's, skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from avibe.evals.importers.reading import (
    AGENT_NAMES,
    Collector,
    Imported,
    as_flag,
    as_name,
    finish,
    json_lines,
    shown,
)
from avibe.evals.scenario import DEFAULT_START

_SLASH: Final = re.compile(r"/[A-Za-z][\w-]*(?: [^\n]*)?")  # a whole message of one slash command
_MESSAGE_TYPES: Final = frozenset({"user", "assistant", "tool", "plan"})


def is_craft_line(data: Mapping[str, Any]) -> bool:
    """A Craft session's first line, or one of its message lines (content beside `order` or a tool)."""
    if "sdkSessionId" in data and "workspaceRootPath" in data:
        return True
    kind = as_name(data.get("type"))
    return kind in _MESSAGE_TYPES and "message" not in data and ("toolUseId" in data or "turnId" in data)


def _time(value: object) -> datetime:
    """Craft writes milliseconds since the epoch; DEFAULT_START for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 10**14:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return DEFAULT_START


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _line(c: Collector, data: Mapping[str, Any]) -> None:
    kind, at = as_name(data.get("type")), _time(data.get("timestamp"))
    if kind == "user":
        text = _text(data.get("content"))
        if _SLASH.fullmatch(text.strip()):
            c.did("slash-command", text.strip(), at)
        else:
            c.say(text, at)
    elif kind in {"assistant", "plan"}:
        c.text(at, _text(data.get("content")))
    elif kind == "tool":
        call_id = str(data.get("toolUseId") or data.get("id") or "")
        arguments = data.get("toolInput") if isinstance(data.get("toolInput"), dict) else {}
        c.call(at, call_id, str(data.get("toolName") or "tool"), dict(arguments or {}))
        result = data.get("toolResult")
        c.output(call_id, _text(result) or _text(data.get("content")), as_flag(data.get("isError")))


def parse_craft(path: Path, user: str) -> Imported:
    c, origin = Collector(user, AGENT_NAMES["craft"]), ""
    lines: list[tuple[float, int, Mapping[str, Any]]] = []
    for number, line in json_lines(path):
        data: Mapping[str, Any] = line
        if "sdkSessionId" in data:
            origin = origin or _text(data.get("sdkSessionId")) or _text(data.get("id"))
        if as_name(data.get("type")) not in _MESSAGE_TYPES:
            continue  # the session's line, info and auth-request lines: Craft's, not the conversation
        order = data.get("order")
        shown_at = float(order) if isinstance(order, int | float) and not isinstance(order, bool) else -1.0
        lines.append((shown_at, number, data))
    if all(line[0] >= 0 for line in lines):  # shown order only where every line has one
        lines.sort(key=lambda line: (line[0], line[1]))
    for _, number, message in lines:
        c.where = f"{shown(path)}:{number}"
        _line(c, message)
    return finish(c, path, "craft", origin)
