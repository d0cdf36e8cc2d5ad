"""OpenCode sessions: `opencode export <id>` JSON ({info, messages: [{info, parts}]}), or a session file
of its storage (`storage/session/<project>/<id>.json`, messages in `storage/message/<id>/*.json`, their
parts in `storage/part/<message id>/*.json`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from avibe.errors import SessionImportError
from avibe.evals.importers.reading import AGENT_NAMES, Collector, Imported, as_flag, finish, read_json, shown
from avibe.evals.scenario import DEFAULT_START

log = logging.getLogger(__name__)


def _opencode_time(info: Mapping[str, Any], where: str) -> datetime:
    """When a message was created (epoch milliseconds); DEFAULT_START when the file does not say, a clear
    error when it says something impossible (NaN, infinite, beyond year 9999)."""
    created = (info.get("time") or {}).get("created") if isinstance(info.get("time"), Mapping) else None
    if created is None:
        return DEFAULT_START
    if isinstance(created, int | float) and not isinstance(created, bool) and math.isfinite(created):
        try:
            return datetime.fromtimestamp(created / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    ident, value = ascii(str(info.get("id", ""))[:80]), ascii(str(created)[:40])
    raise SessionImportError(
        f"{where}: not an importable session (message {ident}: time.created {value} is not a time in "
        "epoch milliseconds)"
    )


def _opencode_storage(path: Path, session: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Messages with their parts, read from the storage folders beside the session file."""
    absolute = path.absolute()  # a relative path has no parents to find the storage folders by
    if len(absolute.parents) < 3:
        raise SessionImportError(
            f"{shown(path)}: an OpenCode session file lies in storage/session/<project>/, this one does not"
        )
    root, sid = absolute.parents[2], str(session.get("id") or path.stem)
    folder = root / "message" / sid
    if not folder.is_dir():
        raise SessionImportError(f"{shown(path)}: no message folder {shown(folder)} for session {sid!a}")
    messages = []
    for file in sorted(folder.glob("*.json")):
        info = read_json(file)
        if not isinstance(info, dict):
            log.warning("%s: not a message object; skipped", shown(file))
            continue
        parts_dir = root / "part" / str(info.get("id", file.stem))
        parts = [read_json(p) for p in sorted(parts_dir.glob("*.json"))] if parts_dir.is_dir() else []
        messages.append({"info": info, "parts": parts})
    return messages


def _opencode_reply_part(c: Collector, part: Mapping[str, Any], at: datetime) -> None:
    """One part of an assistant message: its text, or a tool call with its output (or error)."""
    if spoken(part):
        c.text(at, str(part.get("text", "")))
    elif part.get("type") == "tool":
        state: Mapping[str, Any] = part["state"] if isinstance(part.get("state"), Mapping) else {}
        call_id = str(part.get("callID") or part.get("id") or "")
        arguments = state.get("input")
        c.call(
            at, call_id, str(part.get("tool", "tool")), dict(arguments) if isinstance(arguments, dict) else {}
        )
        if state.get("status") == "error":
            c.output(call_id, str(state.get("error", "")), error=True)
        else:
            c.output(call_id, str(state.get("output", "")))


def spoken(part: Mapping[str, Any]) -> bool:
    """A text part the person typed (OpenCode marks the ones it adds itself as synthetic)."""
    return (
        part.get("type") == "text" and not as_flag(part.get("synthetic")) and not as_flag(part.get("ignored"))
    )


def parse_opencode(path: Path, user: str) -> Imported:
    data = read_json(path)
    if not isinstance(data, dict):
        raise SessionImportError(f"{shown(path)}: expected a JSON object")
    session: Mapping[str, Any]
    if isinstance(data.get("messages"), list):  # `opencode export`
        session = data["info"] if isinstance(data.get("info"), Mapping) else {}
        messages = data["messages"]
    else:  # a session file of OpenCode's storage
        session, messages = data, _opencode_storage(path, data)
    entries = [m for m in messages if isinstance(m, Mapping) and isinstance(m.get("info"), Mapping)]
    if len(entries) < len(messages):
        log.warning("%s: %d messages without an info object skipped", path, len(messages) - len(entries))
    where = shown(path)
    timed = [(_opencode_time(m["info"], where), str(m["info"].get("id", "")), m) for m in entries]
    timed.sort(key=lambda t: (t[0], t[1]))
    c = Collector(user, AGENT_NAMES["opencode"])
    for at, ident, message in timed:
        info = message["info"]
        c.where = f"{where}: message {ident[:80]!a}"
        raw_parts = message.get("parts")
        if raw_parts is not None and not isinstance(raw_parts, list):
            log.warning("%s: parts is not a list; skipped", c.where)
        parts = [p for p in raw_parts if isinstance(p, Mapping)] if isinstance(raw_parts, list) else []
        if info.get("role") == "user":  # one person's message, however many text parts it came in
            c.say("\n".join(str(p.get("text", "")) for p in parts if spoken(p)), at)
        elif info.get("role") == "assistant":
            for part in parts:
                _opencode_reply_part(c, part, at)
    return finish(c, path, "opencode", str(session.get("id", "")))


def is_opencode(path: Path) -> bool:
    """An OpenCode export ({info, messages}) or storage session file (ses_ id), both one JSON object."""
    if path.suffix != ".json":
        return False
    try:
        data = read_json(path)
    except SessionImportError:
        return False
    if not isinstance(data, dict):
        return False
    return isinstance(data.get("messages"), list) or str(data.get("id", "")).startswith("ses_")
