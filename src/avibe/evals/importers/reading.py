"""What every importer shares: reading a file (UTF-8, JSON, JSON lines) with errors that name the file and
line, reading fields as the type they must be, and the collector that turns the turns read into a
`Scenario` (tool output attached to its tool call)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from avibe.errors import SessionImportError
from avibe.evals.scenario import (
    DEFAULT_START,
    AssistantTurn,
    BackgroundInput,
    Event,
    Scenario,
    ToolUse,
    UserMessage,
)
from avibe.record.agents import agent_of_format

log = logging.getLogger(__name__)


Format = Literal["claude", "codex", "opencode", "craft", "antigravity"]
FORMATS: Final[tuple[Format, ...]] = ("claude", "codex", "opencode", "craft", "antigravity")
AGENT_NAMES: Final[dict[Format, str]] = {fmt: agent_of_format(fmt) for fmt in FORMATS}  # the agent registry's


def as_flag(value: object) -> bool:
    """A boolean field as the file means it: `true`, `"true"`, `1` are true; `false`, `"false"`, `0`,
    `null` or a missing field are false (a string "false" is not true)."""
    if isinstance(value, str):
        return value.strip().casefold() in {"true", "1", "yes"}
    return value is True or (isinstance(value, int | float) and value == 1)


def as_name(value: object) -> str:
    """A type or role field as text; anything that is not text names nothing."""
    return value if isinstance(value, str) else ""


def shown(path: Path) -> str:
    """The path for a one-line message: control characters escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(path))


@dataclass
class Turn:
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


class Collector:
    """Builds events in order; tool outputs are attached to the call they answer."""

    def __init__(self, user: str, agent: str = "") -> None:
        self.user, self.agent = user, agent
        self.where = ""  # file:line of what is being read, for error messages
        self.events: list[Event] = []
        self.times: list[datetime] = []
        self.turn: Turn | None = None
        self.turn_at: datetime | None = None
        self.calls: dict[str, dict[str, Any]] = {}
        self.reasons: list[tuple[str, datetime]] = []  # rejection reasons waiting for their turn to end

    def flush(self) -> None:
        if self.turn is not None and (self.turn.texts or self.turn.uses):
            self.events.append(self.turn.freeze())
            self.times.append(self.turn_at or DEFAULT_START)
        self.turn = None
        for text, at in self.reasons:
            self.events.append(UserMessage(self.user, text, "rejection"))
            self.times.append(at)
        self.reasons.clear()

    def rejected(self, text: str, at: datetime) -> None:
        """The words the person typed when rejecting a tool call: theirs, tagged as a rejection reason.
        They follow the turn that made the call, once every output of that turn is in (a turn's calls
        may be answered over several lines), before whatever the agent or the person does next."""
        if text.strip():
            self.reasons.append((text, at))

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

    def reply(self, at: datetime) -> Turn:
        if self.reasons:  # the agent acts after a rejection: the person's reason comes first
            self.flush()
        if self.turn is None:
            self.turn, self.turn_at = Turn(), at
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
        use["output"], use["error"], use["answered"] = text, error, True

    def settle(self) -> None:
        """End the turn once every call it made has its output: parallel calls are answered over
        several lines, and an output arriving after its turn ended would be lost."""
        if self.turn is not None and all(u.get("answered") for u in self.turn.uses):
            self.flush()


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SessionImportError(f"{shown(path)}: cannot read ({err.strerror or err})") from err
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SessionImportError(
            f"{shown(path)}:{line}: not an importable session (UnicodeDecodeError: byte "
            f"{data[err.start]:#04x} at offset {err.start} is not UTF-8)"
        ) from err


def parse_json(text: str, where: str, what: str) -> Any:
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


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text(path)
    # JSONL lines end at "\n" only: a JSON string may hold U+2028 and others that splitlines() breaks at
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        data = parse_json(line, f"{shown(path)}:{number}", "a JSON line")
        if not isinstance(data, dict):
            raise SessionImportError(f"{shown(path)}:{number}: expected a JSON object")
        yield number, data


def read_json(path: Path) -> Any:
    return parse_json(read_text(path), shown(path), "JSON")


def parse_time(value: object) -> datetime:
    """An ISO time of the file, in UTC; DEFAULT_START for a missing or impossible one."""
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
        except (ValueError, OverflowError):
            log.warning("impossible time %a replaced by %s", value[:60], DEFAULT_START.isoformat())
    return DEFAULT_START


def block_text(content: object) -> str:
    """Text of a tool_result's content: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return ""


def content_blocks(c: Collector, content: object, role: str) -> list[Mapping[str, Any]] | str:
    """A message's content: text, or its blocks; anything else is a clear error naming the line."""
    if isinstance(content, str):
        return content
    if content is None:
        return []
    if not isinstance(content, list):
        kind = type(content).__name__
        raise SessionImportError(f"{c.where}: {role} content is {kind}, expected text or a list of blocks")
    return [b for b in content if isinstance(b, Mapping)]


def finish(c: Collector, path: Path, fmt: Format, origin: str) -> Imported:
    c.flush()
    if not c.events:
        raise SessionImportError(f"{shown(path)}: no messages found - is this a {fmt} session file?")
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
