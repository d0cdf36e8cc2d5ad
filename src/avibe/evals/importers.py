"""Import real conversations: Claude Code session JSONL, Codex rollout JSONL and OpenCode sessions
(issue 6, item 4; issue 11, item 3).

Both become a `Scenario` (type "imported", no ground truth) that every strategy can replay, with tool
output attached to its tool call, and can be recorded as an Avibe session: the person's messages through
`avibe.ingress.deliver` (so their source is right), the assistant's replies through `record_reply`.
Tool output is never recorded (A3); it stays in the replay conversation, saved as session state.

Who said it is decided by structure, never taken on trust (N7, T1): the file's own fields first (Claude
Code's `isMeta`, `isSidechain`, `isCompactSummary`, read as booleans even when written as strings;
Codex's `event_msg` user_message events, which name what the person typed). Where a file has no such
field, a user-role text is the person's words only when it is not one of the forms the agent writes into
the user role itself - a shell command run with `!` and its output, a slash command and its output, a
compaction summary, a system reminder (as whole elements), injected context. Those are skipped, or
recorded as an input of the imported agent (`agent` kind, its ref naming the form) when they say what
the person did (CLAUDE_FORMS, CODEX_FORMS; docs/eval-format.md has the table). A message merely opening
like an element (`<system-reminder>`, `<permissions`) is not dropped: it stays the person's.

Claude Code (`~/.claude/projects/<project>/<session>.jsonl`): lines of type "user" / "assistant" with
`message.content` a string or blocks (text, thinking, tool_use, tool_result); a user line that carries
only tool_result blocks is tool output, not the person's words; sidechain and meta lines are skipped.
Codex (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines {timestamp, type, payload}; messages and
tool calls come from `response_item` payloads (message, function_call, function_call_output,
custom_tool_call, custom_tool_call_output); `event_msg` lines repeat them for the UI and are skipped.
OpenCode: `opencode export <id>` JSON ({info, messages: [{info, parts}]}), or a session file of its
storage (`storage/session/<project>/<id>.json`, messages in `storage/message/<id>/*.json`, their parts in
`storage/part/<message id>/*.json`); text parts (synthetic ones are OpenCode's, not the person's) and tool
parts whose `state` holds input and output (or error); reasoning, step and patch parts are skipped.

A file that cannot be imported raises `SessionImportError` (an `AvibeError`) with a one-line message
naming the file and line: unreadable, not UTF-8, not JSON, nested too deeply, a field of the wrong type,
an impossible OpenCode time. (Text the record cannot hold - NUL, lone surrogates - is refused when it is
recorded: `vibe import` rehearses the whole import first, so nothing is written.)
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from avibe.errors import SessionImportError as SessionImportError  # re-exported: the CLI catches it
from avibe.evals.scenario import (
    DEFAULT_START,
    AssistantTurn,
    BackgroundInput,
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
# ---- forms the agents write into the user role (N7): never the person's words ----------------------------

Form = Literal["words", "command", "skip"]
# (opening, ref, what it is, what import does): "command" records an `agent` input whose ref names the
# form, "skip" leaves it out of the record and the replay.
FormRule = tuple[str, str, str, Form]
CLAUDE_FORMS: Final[tuple[FormRule, ...]] = (
    ("<bash-input>", "shell-command", "a shell command the person ran with `!`", "command"),
    ("<bash-stdout>", "shell-output", "the output of a `!` shell command (tool output, A3)", "skip"),
    ("<bash-stderr>", "shell-output", "the output of a `!` shell command (tool output, A3)", "skip"),
    ("<command-name>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<command-message>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<command-args>", "slash-command", "a slash command the person ran (`/model opus`)", "command"),
    ("<local-command-stdout>", "command-output", "the output of a slash command", "skip"),
    ("<local-command-stderr>", "command-output", "the output of a slash command", "skip"),
    ("<local-command-caveat>", "caveat", "Claude Code's note about local commands", "skip"),
    ("<user-prompt-submit-hook>", "hook-output", "the output of a hook", "skip"),
    ("<task-notification>", "task-notification", "a background task's notification", "command"),
    ("[Request interrupted by user", "interrupted", "Claude Code's interruption marker", "skip"),
    (
        "This session is being continued from a previous conversation",
        "compact-summary",
        "Claude Code's summary of the conversation before a compaction (when `isCompactSummary` is missing)",
        "command",
    ),
)
# Elements Claude Code puts beside the person's text in the same message (a system reminder among them):
# each a text block of its own, or at the start or the end of one; removed by that structure
# (`_without_elements`). A text that is nothing but such elements says nothing; one that merely starts
# with an opening tag, with no closing tag after it, is the person's.
_CLAUDE_INLINE: Final = ("system-reminder", "ide_opened_file", "ide_selection", "ide_diagnostics")
CODEX_FORMS: Final[tuple[FormRule, ...]] = (
    ("<user_shell_command>", "shell-command", "a shell command the person ran with `!`", "command"),
    ("<environment_context>", "context", "the working directory, sandbox and approval settings", "skip"),
    ("<user_instructions>", "context", "the person's instructions file, injected by Codex", "skip"),
    ("# AGENTS.md instructions", "context", "AGENTS.md, injected by Codex", "skip"),
    ("<INSTRUCTIONS>", "context", "AGENTS.md, injected by Codex", "skip"),
    ("<turn_aborted>", "interrupted", "Codex's interruption marker", "skip"),
    ("<skill>", "context", "a skill's text, injected by Codex", "skip"),
    ("<subagent_notification>", "notification", "a sub-agent's notification", "skip"),
    ("<collaboration_mode>", "context", "Codex's mode instructions", "skip"),
    (
        "<user_action>",
        "user-action",
        "what the person did in Codex's interface (a review), as Codex tells it",
        "command",
    ),
)


def _form(forms: tuple[FormRule, ...], text: str) -> tuple[str, Form]:
    """The form of a user-role text by its opening element (case-insensitive): its ref and what import
    does with it; ("", "words") for the person's own words."""
    head = text.lstrip().casefold()
    for opening, ref, _, action in forms:
        if head.startswith(opening.casefold()):
            return ref, action
    return "", "words"


def _element(text: str, name: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return found.group(1).strip() if found else ""


def _leading_element(text: str) -> str:
    """The name of the element `text` opens with (after whitespace), or ""."""
    head = text.lstrip()
    return next((name for name in _CLAUDE_INLINE if head.startswith(f"<{name}>")), "")


def _without_elements(text: str) -> str:
    """A user-role text without the elements Claude Code put at its start or end. An element at the
    start runs to the LAST closing tag of its name in the text, one at the end from the FIRST opening tag
    of its name: a reminder quotes file contents, and a `</system-reminder>` inside them must not end it
    early and turn what follows into the person's words (a person's text holding such a tag loses that
    part rather than the agent's text becoming theirs; logged)."""
    rest, cut = text, False
    while name := _leading_element(rest):
        head = rest.lstrip()
        close = head.rfind(f"</{name}>")
        if close < 0:
            break  # an opening tag the person typed: their words
        if head.find(f"</{name}>") != close:
            log.warning("a <%s> element quotes its closing tag; it runs to the last one", name)
        rest, cut = head[close + len(name) + 3 :], True
    tail = rest.rstrip()
    for name in _CLAUDE_INLINE:
        if tail.endswith(f"</{name}>") and (start := tail.find(f"<{name}>")) >= 0:
            rest, cut = tail[:start].rstrip(), True
            tail = rest
    return rest.lstrip() if cut else text


def _claude_command(text: str, ref: str) -> str:
    """What the person did, as they typed it: `! git status`, `/model opus`; a notification as it is."""
    if ref == "shell-command":
        return f"! {_element(text, 'bash-input')}"
    if ref == "slash-command":
        name = _element(text, "command-name") or f"/{_element(text, 'command-message')}"
        return f"{name} {_element(text, 'command-args')}".strip()
    return text.strip()


def _flag(value: object) -> bool:
    """A boolean field as the file means it: `true`, `"true"`, `1` are true; `false`, `"false"`, `0`,
    `null` or a missing field are false (a string "false" is not true)."""
    if isinstance(value, str):
        return value.strip().casefold() in {"true", "1", "yes"}
    return value is True or (isinstance(value, int | float) and value == 1)


def _name(value: object) -> str:
    """A type or role field as text; anything that is not text names nothing."""
    return value if isinstance(value, str) else ""


def _shown(path: Path) -> str:
    """The path for a one-line message: control characters escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(path))


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

    def __init__(self, user: str, agent: str = "") -> None:
        self.user, self.agent = user, agent
        self.where = ""  # file:line of what is being read, for error messages
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

    def did(self, form: str, text: str, at: datetime) -> None:
        """Something the person did through the agent (a `!` command, a slash command) or a notification:
        an input of the imported agent, tagged with its form - never the person's words (N7)."""
        self.flush()
        if text.strip():
            self.events.append(BackgroundInput("agent", self.agent, form, text))
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


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SessionImportError(f"{_shown(path)}: cannot read ({err.strerror or err})") from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SessionImportError(
            f"{_shown(path)}:{line}: not an importable session (UnicodeDecodeError: byte "
            f"{data[err.start]:#04x} at offset {err.start} is not UTF-8)"
        ) from err


def _parse_json(text: str, where: str, what: str) -> Any:
    """JSON, or a one-line SessionImportError: malformed, nested too deeply, a number Python refuses."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        line = f":{err.lineno}" if what == "JSON" else ""
        raise SessionImportError(f"{where}{line}: not {what} ({err.msg})") from err
    except RecursionError as err:
        raise SessionImportError(f"{where}: {what} nested too deeply to import") from err
    except ValueError as err:  # e.g. an integer of more than 4,300 digits
        raise SessionImportError(f"{where}: not usable {what} ({str(err).splitlines()[0]})") from err


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = _read_text(path)
    # JSONL lines end at "\n" only: a JSON string may hold U+2028 and others that splitlines() breaks at
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        data = _parse_json(line, f"{_shown(path)}:{number}", "a JSON line")
        if not isinstance(data, dict):
            raise SessionImportError(f"{_shown(path)}:{number}: expected a JSON object")
        yield number, data


def _time(value: object) -> datetime:
    """An ISO time of the file, in UTC; DEFAULT_START for a missing or impossible one."""
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
        except (ValueError, OverflowError):
            log.warning("impossible time %a replaced by %s", value[:60], DEFAULT_START.isoformat())
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


def _claude_user_text(c: _Collector, text: str, at: datetime) -> str:
    """The person's words in one user-role text, "" when it holds none: a form Claude Code writes itself
    is recorded as the agent's input or skipped (CLAUDE_FORMS); reminders beside the words are removed."""
    form, action = _form(CLAUDE_FORMS, text)
    if action == "command":
        c.did(form, _claude_command(text, form), at)
        return ""
    if action == "skip":
        return ""
    return _without_elements(text)


def _content(c: _Collector, content: object, role: str) -> list[Mapping[str, Any]] | str:
    """A message's content: text, or its blocks; anything else is a clear error naming the line."""
    if isinstance(content, str):
        return content
    if content is None:
        return []
    if not isinstance(content, list):
        kind = type(content).__name__
        raise SessionImportError(f"{c.where}: {role} content is {kind}, expected text or a list of blocks")
    return [b for b in content if isinstance(b, Mapping)]


def _claude_line(c: _Collector, data: Mapping[str, Any], at: datetime) -> None:
    message = data.get("message")
    if not isinstance(message, Mapping):
        return
    content = _content(c, message.get("content"), str(data["type"]))
    if data["type"] == "user":
        if isinstance(content, str):
            c.say(_claude_user_text(c, content, at), at)
            return
        for b in content:
            if b.get("type") == "tool_result":
                c.output(
                    str(b.get("tool_use_id", "")), _block_text(b.get("content")), _flag(b.get("is_error"))
                )
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        words = [_claude_user_text(c, text, at) for text in texts]  # each block classified on its own
        c.say("\n".join(w for w in words if w.strip()), at)
        return
    if isinstance(content, str):
        c.text(at, content)
        return
    for b in content:
        if b.get("type") == "text":
            c.text(at, str(b.get("text", "")))
        elif b.get("type") == "tool_use":
            arguments = b.get("input") if isinstance(b.get("input"), dict) else {}
            c.call(at, str(b.get("id", "")), str(b.get("name", "tool")), dict(arguments or {}))


def parse_claude(path: Path, user: str) -> Imported:
    c, origin = _Collector(user, AGENT_NAMES["claude"]), ""
    for number, data in _lines(path):
        if (
            _name(data.get("type")) not in {"user", "assistant"}
            or _flag(data.get("isSidechain"))
            or _flag(data.get("isMeta"))
        ):
            continue
        if _flag(data.get("isCompactSummary")):  # Claude Code's own summary: not the person's words
            continue
        c.where = f"{_shown(path)}:{number}"
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


def _said(text: str) -> str:
    """A text as compared with what Codex says the person typed: whitespace at the ends does not count."""
    return text.strip()


def _codex_user_block(c: _Collector, text: str, at: datetime, typed: Counter[str] | None) -> str:
    """The person's words in one block of a user-role message, "" when it holds none. When the file
    says what the person typed (`event_msg` user_message), a block is theirs exactly when it is one of
    those; otherwise it is decided by the forms Codex writes (CODEX_FORMS)."""
    form, action = _form(CODEX_FORMS, text)
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
    return f"! {_element(text, 'command')}" if form == "shell-command" else text.strip()


def _codex_item(c: _Collector, item: Mapping[str, Any], at: datetime, typed: Counter[str] | None) -> None:
    kind = _name(item.get("type"))
    if kind == "message":
        content = _content(c, item.get("content"), str(item.get("role", "message")))
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
    c, origin = _Collector(user, AGENT_NAMES["codex"]), ""
    lines = list(_lines(path))
    typed = _codex_typed(lines)
    for number, data in lines:
        payload = data.get("payload")
        if not isinstance(payload, Mapping):
            continue
        c.where = f"{_shown(path)}:{number}"
        if data.get("type") == "session_meta":
            origin = str(payload.get("id", ""))
        elif data.get("type") == "response_item":
            _codex_item(c, payload, _time(data.get("timestamp")), typed)
    return _finish(c, path, "codex", origin)


def _read_json(path: Path) -> Any:
    return _parse_json(_read_text(path), _shown(path), "JSON")


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
            f"{_shown(path)}: an OpenCode session file lies in storage/session/<project>/, this one does not"
        )
    root, sid = absolute.parents[2], str(session.get("id") or path.stem)
    folder = root / "message" / sid
    if not folder.is_dir():
        raise SessionImportError(f"{_shown(path)}: no message folder {_shown(folder)} for session {sid!a}")
    messages = []
    for file in sorted(folder.glob("*.json")):
        info = _read_json(file)
        if not isinstance(info, dict):
            log.warning("%s: not a message object; skipped", _shown(file))
            continue
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
        raise SessionImportError(f"{_shown(path)}: expected a JSON object")
    session: Mapping[str, Any]
    if isinstance(data.get("messages"), list):  # `opencode export`
        session = data["info"] if isinstance(data.get("info"), Mapping) else {}
        messages = data["messages"]
    else:  # a session file of OpenCode's storage
        session, messages = data, _opencode_storage(path, data)
    entries = [m for m in messages if isinstance(m, Mapping) and isinstance(m.get("info"), Mapping)]
    if len(entries) < len(messages):
        log.warning("%s: %d messages without an info object skipped", path, len(messages) - len(entries))
    where = _shown(path)
    timed = [(_opencode_time(m["info"], where), str(m["info"].get("id", "")), m) for m in entries]
    timed.sort(key=lambda t: (t[0], t[1]))
    c = _Collector(user, AGENT_NAMES["opencode"])
    for at, ident, message in timed:
        info = message["info"]
        c.where = f"{where}: message {ident[:80]!a}"
        raw_parts = message.get("parts")
        if raw_parts is not None and not isinstance(raw_parts, list):
            log.warning("%s: parts is not a list; skipped", c.where)
        parts = [p for p in raw_parts if isinstance(p, Mapping)] if isinstance(raw_parts, list) else []
        if info.get("role") == "user":  # one person's message, however many text parts it came in
            c.say("\n".join(str(p.get("text", "")) for p in parts if _spoken(p)), at)
        elif info.get("role") == "assistant":
            for part in parts:
                _opencode_reply_part(c, part, at)
    return _finish(c, path, "opencode", str(session.get("id", "")))


def _spoken(part: Mapping[str, Any]) -> bool:
    """A text part the person typed (OpenCode marks the ones it adds itself as synthetic)."""
    return part.get("type") == "text" and not _flag(part.get("synthetic")) and not _flag(part.get("ignored"))


def _finish(c: _Collector, path: Path, fmt: Format, origin: str) -> Imported:
    c.flush()
    if not c.events:
        raise SessionImportError(f"{_shown(path)}: no messages found - is this a {fmt} session file?")
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
        data = _read_json(path)
    except SessionImportError:
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
        if "payload" in data and _name(data.get("type")) in {
            "session_meta",
            "response_item",
            "event_msg",
            "turn_context",
        }:
            return "codex"
        kind = _name(data.get("type"))
        if kind in {"user", "assistant", "summary"} and ("message" in data or "summary" in data):
            return "claude"
    raise SessionImportError(
        f"{_shown(path)}: neither a Claude Code session, a Codex rollout nor an OpenCode session"
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
        elif isinstance(event, BackgroundInput):  # what the person did through the agent: not their words
            deliver(store, session.id, Source(event.source, event.name, event.ref), event.text, at=at)
        elif isinstance(event, AssistantTurn) and event.text:
            record_reply(store, session.id, event.text, agent=agent, at=at)
    store.save_state(session.id, REPLAY_STATE_KEY, scenario_to_dict(imported.scenario))
    return session.id
