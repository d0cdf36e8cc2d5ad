"""Import real conversations: Claude Code session JSONL, Codex rollout JSONL and OpenCode sessions
(issue 6, item 4).

Both become a `Scenario` (type "imported", no ground truth) that every strategy can replay, with tool
output attached to its tool call, and can be recorded as an Avibe session: the person's messages through
`avibe.ingress.deliver` (so their source is right), the assistant's replies through `record_reply`.
Tool output is never recorded (A3); it stays in the replay conversation, saved as session state.

Claude Code (`~/.claude/projects/<project>/<session>.jsonl`): lines of type "user" / "assistant" with
`message.content` a string or blocks (text, thinking, tool_use, tool_result); a user line that carries
only tool_result blocks is tool output, not the person's words; sidechain and meta lines are skipped.
Codex (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines {timestamp, type, payload}; messages and
tool calls come from `response_item` payloads (message, function_call, function_call_output,
custom_tool_call, custom_tool_call_output); `event_msg` lines repeat them for the UI and are skipped,
as are the injected `<environment_context>` / `<user_instructions>` / AGENTS.md messages.
OpenCode: `opencode export <id>` JSON ({info, messages: [{info, parts}]}), or a session file of its
storage (`storage/session/<project>/<id>.json`, messages in `storage/message/<id>/*.json`, their parts in
`storage/part/<message id>/*.json`); text parts (synthetic ones are OpenCode's, not the person's) and tool
parts whose `state` holds input and output (or error); reasoning, step and patch parts are skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from avibe.evals.scenario import (
    DEFAULT_START,
    AssistantTurn,
    Event,
    Scenario,
    ToolUse,
    UserMessage,
    scenario_to_dict,
)
from avibe.ports import RecordStore

log = logging.getLogger(__name__)
Format = Literal["claude", "codex", "opencode"]
FORMATS: Final[tuple[Format, ...]] = ("claude", "codex", "opencode")
AGENT_NAMES: Final[dict[Format, str]] = {"claude": "claude-code", "codex": "codex", "opencode": "opencode"}
REPLAY_STATE_KEY: Final = "eval.replay"
_INJECTED: Final = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions",
)


class SessionImportError(ValueError):
    """A session file that cannot be imported; the message names the file and line."""


@dataclass
class _Turn:
    """An assistant turn being assembled (Claude Code splits one reply over several lines)."""

    texts: list[str] = field(default_factory=list)
    uses: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments", "output", "error"}

    def freeze(self) -> AssistantTurn:
        uses = tuple(ToolUse(u["id"], u["name"], u["arguments"], u["output"], u["error"]) for u in self.uses)
        return AssistantTurn("\n\n".join(t for t in self.texts if t.strip()), uses)


@dataclass(frozen=True, slots=True)
class Imported:
    scenario: Scenario
    times: tuple[datetime, ...]  # when each event happened, as the file says
    format: Format
    origin: str  # the file's own session id


class _Collector:
    """Builds events in order; tool outputs are attached to the call they answer."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.events: list[Event] = []
        self.times: list[datetime] = []
        self.turn: _Turn | None = None
        self.turn_at: datetime | None = None
        self.calls: dict[str, dict[str, Any]] = {}

    def flush(self) -> None:
        if self.turn is not None and (self.turn.texts or self.turn.uses):
            self.events.append(self.turn.freeze())
            self.times.append(self.turn_at or DEFAULT_START)
        self.turn = None

    def say(self, text: str, at: datetime) -> None:
        self.flush()
        if text.strip():
            self.events.append(UserMessage(self.user, text))
            self.times.append(at)

    def reply(self, at: datetime) -> _Turn:
        if self.turn is None:
            self.turn, self.turn_at = _Turn(), at
        return self.turn

    def text(self, at: datetime, text: str) -> None:
        """Assistant text; after tool calls it starts a new turn (order: calls, outputs, text)."""
        if self.turn is not None and self.turn.uses:
            self.flush()
        self.reply(at).texts.append(text)

    def call(self, at: datetime, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        use = {"id": call_id, "name": name, "arguments": arguments, "output": "", "error": False}
        self.reply(at).uses.append(use)
        self.calls[call_id] = use

    def output(self, call_id: str, text: str, error: bool = False) -> None:
        use = self.calls.get(call_id)
        if use is None:
            log.warning("tool output for unknown call %s dropped", call_id)
            return
        use["output"], use["error"] = text, error


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SessionImportError(f"{path}: cannot read ({err.strerror})") from err
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise SessionImportError(f"{path}:{number}: not a JSON line ({err.msg})") from err
        if not isinstance(data, dict):
            raise SessionImportError(f"{path}:{number}: expected a JSON object")
        yield number, data


def _time(value: object) -> datetime:
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return DEFAULT_START
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return DEFAULT_START


def _block_text(content: object) -> str:
    """Text of a tool_result's content: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return ""


def _claude_line(c: _Collector, data: Mapping[str, Any], at: datetime) -> None:
    message = data.get("message")
    if not isinstance(message, Mapping):
        return
    content = message.get("content")
    if data["type"] == "user":
        if isinstance(content, str):
            c.say(content, at)
            return
        blocks = [b for b in content or [] if isinstance(b, Mapping)]
        for b in blocks:
            if b.get("type") == "tool_result":
                c.output(
                    str(b.get("tool_use_id", "")), _block_text(b.get("content")), bool(b.get("is_error"))
                )
        c.say("\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text"), at)
        return
    blocks = [b for b in (content if isinstance(content, list) else []) if isinstance(b, Mapping)]
    for b in blocks:
        if b.get("type") == "text":
            c.text(at, str(b.get("text", "")))
        elif b.get("type") == "tool_use":
            arguments = b.get("input") if isinstance(b.get("input"), dict) else {}
            c.call(at, str(b.get("id", "")), str(b.get("name", "tool")), dict(arguments or {}))


def parse_claude(path: Path, user: str) -> Imported:
    c, origin = _Collector(user), ""
    for _, data in _lines(path):
        if data.get("type") not in {"user", "assistant"} or data.get("isSidechain") or data.get("isMeta"):
            continue
        if data.get("isCompactSummary"):  # Claude Code's own summary: not the person's words
            continue
        origin = origin or str(data.get("sessionId", ""))
        _claude_line(c, data, _time(data.get("timestamp")))
    return _finish(c, path, "claude", origin)


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


def _codex_item(c: _Collector, item: Mapping[str, Any], at: datetime) -> None:
    kind = item.get("type")
    if kind == "message":
        text = "\n".join(str(b.get("text", "")) for b in item.get("content") or [] if isinstance(b, Mapping))
        if item.get("role") == "user" and not text.lstrip().startswith(_INJECTED):
            c.say(text, at)
        elif item.get("role") == "assistant":
            c.text(at, text)
    elif kind in {"function_call", "custom_tool_call"}:
        raw = item.get("arguments", item.get("input"))
        c.call(at, str(item.get("call_id", "")), str(item.get("name", "tool")), _codex_arguments(raw))
    elif kind in {"function_call_output", "custom_tool_call_output"}:
        c.output(str(item.get("call_id", "")), _codex_output(item.get("output")))


def parse_codex(path: Path, user: str) -> Imported:
    c, origin = _Collector(user), ""
    for _, data in _lines(path):
        payload = data.get("payload")
        if not isinstance(payload, Mapping):
            continue
        if data.get("type") == "session_meta":
            origin = str(payload.get("id", ""))
        elif data.get("type") == "response_item":
            _codex_item(c, payload, _time(data.get("timestamp")))
    return _finish(c, path, "codex", origin)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SessionImportError(f"{path}: cannot read ({err.strerror})") from err
    except json.JSONDecodeError as err:
        raise SessionImportError(f"{path}:{err.lineno}: not JSON ({err.msg})") from err


def _opencode_time(info: Mapping[str, Any]) -> datetime:
    created = (info.get("time") or {}).get("created") if isinstance(info.get("time"), Mapping) else None
    if isinstance(created, int | float):
        return datetime.fromtimestamp(created / 1000, UTC)  # OpenCode stores epoch milliseconds
    return DEFAULT_START


def _opencode_storage(path: Path, session: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Messages with their parts, read from the storage folders beside the session file."""
    root, sid = path.parents[2], str(session.get("id") or path.stem)
    folder = root / "message" / sid
    if not folder.is_dir():
        raise SessionImportError(f"{path}: no message folder {folder} for session {sid}")
    messages = []
    for file in sorted(folder.glob("*.json")):
        info = _read_json(file)
        parts_dir = root / "part" / str(info.get("id", file.stem))
        parts = [_read_json(p) for p in sorted(parts_dir.glob("*.json"))] if parts_dir.is_dir() else []
        messages.append({"info": info, "parts": parts})
    return messages


def _opencode_reply_part(c: _Collector, part: Mapping[str, Any], at: datetime) -> None:
    """One part of an assistant message: its text, or a tool call with its output (or error)."""
    if _spoken(part):
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


def parse_opencode(path: Path, user: str) -> Imported:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise SessionImportError(f"{path}: expected a JSON object")
    session: Mapping[str, Any]
    if isinstance(data.get("messages"), list):  # `opencode export`
        session = data["info"] if isinstance(data.get("info"), Mapping) else {}
        messages = data["messages"]
    else:  # a session file of OpenCode's storage
        session, messages = data, _opencode_storage(path, data)
    entries = [m for m in messages if isinstance(m, Mapping) and isinstance(m.get("info"), Mapping)]
    if len(entries) < len(messages):
        log.warning("%s: %d messages without an info object skipped", path, len(messages) - len(entries))
    entries.sort(key=lambda m: (_opencode_time(m["info"]), str(m["info"].get("id", ""))))
    c = _Collector(user)
    for message in entries:
        info, at = message["info"], _opencode_time(message["info"])
        parts = [p for p in message.get("parts") or [] if isinstance(p, Mapping)]
        if info.get("role") == "user":  # one person's message, however many text parts it came in
            c.say("\n".join(str(p.get("text", "")) for p in parts if _spoken(p)), at)
        elif info.get("role") == "assistant":
            for part in parts:
                _opencode_reply_part(c, part, at)
    return _finish(c, path, "opencode", str(session.get("id", "")))


def _spoken(part: Mapping[str, Any]) -> bool:
    """A text part the person typed (OpenCode marks the ones it adds itself as synthetic)."""
    return part.get("type") == "text" and not part.get("synthetic") and not part.get("ignored")


def _finish(c: _Collector, path: Path, fmt: Format, origin: str) -> Imported:
    c.flush()
    if not c.events:
        raise SessionImportError(f"{path}: no messages found - is this a {fmt} session file?")
    sid = f"import-{fmt}-{origin or path.stem}"
    scenario = Scenario(
        sid,
        "imported",
        None,
        c.user,
        tuple(c.events),
        start=c.times[0],
        description=f"imported from {path.name} ({fmt})",
    )
    return Imported(scenario, tuple(c.times), fmt, origin)


def _is_opencode(path: Path) -> bool:
    """An OpenCode export ({info, messages}) or storage session file (ses_ id), both one JSON object."""
    if path.suffix != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    return isinstance(data.get("messages"), list) or str(data.get("id", "")).startswith("ses_")


def detect_format(path: Path) -> Format:
    """Codex rollouts have {type, payload} lines; Claude Code lines have type user/assistant + message;
    OpenCode sessions are one JSON object (an export, or a session file of its storage)."""
    if _is_opencode(path):
        return "opencode"
    for _, data in _lines(path):
        if "payload" in data and data.get("type") in {
            "session_meta",
            "response_item",
            "event_msg",
            "turn_context",
        }:
            return "codex"
        if data.get("type") in {"user", "assistant", "summary"} and ("message" in data or "summary" in data):
            return "claude"
    raise SessionImportError(
        f"{path}: neither a Claude Code session, a Codex rollout nor an OpenCode session"
    )


def parse_session_file(path: Path, user: str, fmt: Format | None = None) -> Imported:
    parsers = {"claude": parse_claude, "codex": parse_codex, "opencode": parse_opencode}
    return parsers[fmt or detect_format(path)](path, user)


def record_import(store: RecordStore, imported: Imported, title: str = "") -> str:
    """Record the conversation as a new Avibe session; returns its id. Inputs enter through ingress,
    replies as assistant entries; the replay conversation (with tool output) is kept as session state."""
    from avibe.ingress import deliver, record_reply
    from avibe.record.entries import Source

    agent = AGENT_NAMES[imported.format]
    session = store.create_session(title or imported.scenario.description)
    for event, at in zip(imported.scenario.events, imported.times, strict=True):
        if isinstance(event, UserMessage):
            deliver(store, session.id, Source("user", event.author), event.text, at=at)
        elif isinstance(event, AssistantTurn) and event.text:
            record_reply(store, session.id, event.text, agent=agent, at=at)
    store.save_state(session.id, REPLAY_STATE_KEY, scenario_to_dict(imported.scenario))
    return session.id
