"""Antigravity trajectories (docs/eval-format.md): one JSON line per step, {step_index, source, type,
status, created_at, content, ...}. Source USER_EXPLICIT / type USER_INPUT is what the person typed, inside
`<USER_REQUEST>` (the `<ADDITIONAL_METADATA>` and settings notes beside it are Antigravity's); source
MODEL / PLANNER_RESPONSE is a reply (`content`) and its calls (`tool_calls`: name and args, each arg
JSON-encoded); the MODEL steps after it (RUN_COMMAND, VIEW_FILE, CODE_ACTION, ...) are those calls'
outputs, in order; an ERROR_MESSAGE answers the call it names as failed. SYSTEM steps (ephemeral
reminders, conversation history, system messages) and the model's `thinking` are not the conversation.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from avibe.evals.importers.reading import (
    AGENT_NAMES,
    Collector,
    Imported,
    as_name,
    finish,
    json_lines,
    parse_time,
    shown,
)

_REQUEST: Final = re.compile(r"<USER_REQUEST>\n?(.*?)\n?</USER_REQUEST>", re.DOTALL)


def is_antigravity_line(data: Mapping[str, Any]) -> bool:
    return "step_index" in data and as_name(data.get("source")) in {"USER_EXPLICIT", "MODEL", "SYSTEM"}


def user_words(content: str) -> str:
    """The person's words of a USER_INPUT step: its `<USER_REQUEST>` element (all of them, in order);
    content with no such element is the person's as it is."""
    found = _REQUEST.findall(content)
    return "\n".join(found) if found else content


def _argument(value: object) -> object:
    """An argument as the call meant it: Antigravity writes each one JSON-encoded ("\\"c:\\\\x\\"")."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class _Calls:
    """Calls waiting for their outputs, answered in the order they were made."""

    def __init__(self) -> None:
        self.waiting: deque[str] = deque()

    def make(self, c: Collector, data: Mapping[str, Any]) -> None:
        calls = data.get("tool_calls")
        at, step = parse_time(data.get("created_at")), str(data.get("step_index", ""))
        for k, call in enumerate(calls if isinstance(calls, list) else []):
            if not isinstance(call, Mapping):
                continue
            args = call.get("args") if isinstance(call.get("args"), Mapping) else {}
            arguments = {str(key): _argument(v) for key, v in dict(args or {}).items()}
            call_id = f"step{step}-{k}"
            c.call(at, call_id, str(call.get("name") or "tool"), arguments)
            self.waiting.append(call_id)

    def answer(self, c: Collector, text: str, error: bool) -> None:
        if self.waiting:
            c.output(self.waiting.popleft(), text, error)


def _step(c: Collector, calls: _Calls, data: Mapping[str, Any]) -> None:
    source, kind = as_name(data.get("source")), as_name(data.get("type"))
    at = parse_time(data.get("created_at"))
    if source == "USER_EXPLICIT" and kind == "USER_INPUT":
        calls.waiting.clear()  # the person spoke: calls never answered stay without output
        c.say(user_words(_text(data.get("content"))), at)
    elif source == "MODEL" and kind == "PLANNER_RESPONSE":
        if _text(data.get("content")).strip():
            c.text(at, _text(data.get("content")))
        calls.make(c, data)
    elif source == "MODEL":
        calls.answer(c, _text(data.get("content")), as_name(data.get("status")) == "ERROR")
    elif kind == "ERROR_MESSAGE":
        calls.answer(c, _text(data.get("error")) or _text(data.get("content")), True)


def parse_antigravity(path: Path, user: str) -> Imported:
    c, calls = Collector(user, AGENT_NAMES["antigravity"]), _Calls()
    for number, data in json_lines(path):
        c.where = f"{shown(path)}:{number}"
        _step(c, calls, data)
    return finish(c, path, "antigravity", "")
