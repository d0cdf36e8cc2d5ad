"""What the harness itself knows about the working state, put into the scene next to what the model wrote
(S3, S6, A2): the background jobs still running or unreported, the files read and written, and the last
failing tool call with its verbatim error line. A small model forgets job ids and error texts; the harness
never does, so these never depend on the model.

API:
    WaitingJob(id, command, log, latest, kind)         what the session is waiting for (S3): a background
                                                       job (`latest`: its newest output line), or a watch,
                                                       timer or delegated run (`command` says what it is)
    FailedCall(name, arguments, error_line, then)      the last failing tool call (S5, S6); `then`: the
                                                       same program's call that worked after it
    worked_after(failure, name, arguments, output, is_error) -> FailedCall
        the failure with `then` set when this call is the same program's first success after it
    failure_after(last | None, name, arguments, output, is_error) -> FailedCall | None
        the last failure once this call is done (a new failure, or `last` with what worked after it)
    HarnessFacts(waiting, files_read, files_modified, failure, plan, commands, finished, question)
        frozen; HarnessFacts() is "nothing known"
    open_question(messages) -> (seq, question) | None  a question Vibey asked that no user message followed
        .is_empty -> bool
    failed_call(name, arguments, output, is_error) -> FailedCall | None
        a tool result that failed (an error result, or a shell exit code other than 0), else None
    error_line(output) -> str                          the first line that reads as an error, verbatim
    FACTS_CHARS, FACTS_FLOOR_CHARS                     the budget of each part's harness lines (see below)
    facts_limits(window) -> dict[str, int]             "waiting_for" / "exact_references" -> characters
    facts_text(facts, window) -> dict[str, str]        part -> the harness's lines for it ("" when none)
    add_facts(parts, facts, window) -> SceneParts      the model's parts with the harness's lines after them
    missing_facts(parts, facts, window) -> list[Problem]   the validator's check: every line is there
    with_facts(scene, facts, window) -> str            the scene block re-rendered with the harness's lines

The harness's lines for a part start with HARNESS_MARK and come after the model's own text, never in its
place. Each part's lines are within its budget: items are taken whole in order (waiting jobs, the failing
call, files modified, files read, newest first) while they fit, and what does not fit is counted in a
closing note ("+3 more files read: see the record and `vibe log`"), which always fits because the budget
keeps room for it. The budget scales like the scene's parts (`structured.scene_limits`): FACTS_CHARS at a
32k window and above, never below FACTS_FLOOR_CHARS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from avibe.checkpoint.model import Problem
from avibe.checkpoint.scene import SceneParts, parse_scene, render_scene
from avibe.record.checkpoint import PlanItem
from avibe.record.messages import ChatMessage

HARNESS_MARK: Final = "(from Avibe's own state)"
FACTS_CHARS: Final[dict[str, int]] = {"progress": 800, "waiting_for": 800, "exact_references": 1_000}
FACTS_FLOOR_CHARS: Final[dict[str, int]] = {"progress": 360, "waiting_for": 360, "exact_references": 420}
FACTS_REFERENCE_WINDOW: Final = 32_768
NOTE_ROOM: Final = 90  # characters kept free for the closing "+N more" note
ARGUMENT_CHARS: Final = 200  # a failing call's arguments, shown at most this long (then "...")
ERROR_CHARS: Final = 240  # the error line, at most this long (then "...")
_ERROR_WORDS = re.compile(
    r"error|exception|traceback|fail|fatal|denied|not found|no such|cannot|can't|refused|invalid|"
    r"timed out|killed|panic|abort|mismatch|\b[A-Z]{1,4}\d{2,}:",
    re.IGNORECASE,
)
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # what str.splitlines splits on
_TAG = re.compile(r"<(/?)checkpoint\s*>", re.IGNORECASE)  # a path named like the block's tag would end it
_TRACEBACK: Final = "Traceback (most recent call last):"
_EXIT = re.compile(r"^exit code: (-?\d+)\s*$")


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """Something the session waits for (S3): a background job, or a watch, timer or delegated run."""

    id: str
    command: str  # a job's command; for the others, what they are ("watch ci: command make, every 5m")
    log: str = ""
    latest: str = ""  # the newest line the job has written so far (what it is doing, where it writes)
    kind: str = "background job"


@dataclass(frozen=True, slots=True)
class FailedCall:
    name: str
    arguments: str  # the call's arguments as the harness shows them (a shell call: its command)
    error_line: str  # verbatim from the tool's output
    then: str = ""  # the arguments of the same program's first call that worked after it (the way out)


@dataclass(frozen=True, slots=True)
class HarnessFacts:
    """What the harness knows (newest first in both file lists, as LiveState keeps them)."""

    waiting: tuple[WaitingJob, ...] = ()
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    failure: FailedCall | None = None
    plan: tuple[PlanItem, ...] = ()  # the agent's plan (update_plan), verbatim into "Progress" (S2)
    commands: tuple[str, ...] = ()  # the latest shell commands run, newest first (S6)
    finished: tuple[str, ...] = ()  # background jobs that reported back, newest first (S6)
    question: tuple[int, str] | None = None  # S3: (message number, the question) Vibey asked, unanswered

    @property
    def is_empty(self) -> bool:
        return not (
            self.waiting
            or self.files_read
            or self.files_modified
            or self.failure
            or self.plan
            or self.commands
            or self.finished
            or self.question
        )


def _shorten(text: str, limit: int) -> str:
    """One line (a line break inside a command or a path would end the scene part), at most `limit`."""
    text = _TAG.sub(lambda m: "\u2039" + m.group(0)[1:], _LINE_BREAKS.sub(" ", text)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_line(output: str) -> str:
    """The first line of a tool's output that reads as an error, verbatim (stripped) - a Python traceback's
    head only when nothing else does; else the first line after an "exit code: N" head; else the first
    non-blank line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    body = lines[1:] if lines and _EXIT.match(lines[0]) else lines
    found = [line for line in body if _ERROR_WORDS.search(line)]
    telling = [line for line in found if line != _TRACEBACK]
    return next(iter(telling or found or body or lines), "")


def _arguments(arguments: Mapping[str, Any]) -> str:
    command = arguments.get("command")
    if isinstance(command, str) and command.strip():
        return command.strip()
    return json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)


def failed_call(name: str, arguments: Mapping[str, Any], output: str, is_error: bool) -> FailedCall | None:
    """The failure a tool result reports: an error result, or a shell command whose exit code is not 0."""
    head = output.lstrip().split("\n", 1)[0].strip()
    exited = _EXIT.match(head)
    failed = (
        is_error or (exited is not None and exited.group(1) != "0") or head.startswith("killed by signal")
    )
    if not failed:
        return None
    return FailedCall(name, _arguments(arguments), error_line(output))


def _program(name: str, command: str) -> tuple[str, str]:
    """What makes two commands "the same program": the tool and the command's first word."""
    words = command.split()
    return (name, words[0] if words else "")


def worked_after(
    failure: FailedCall, name: str, arguments: Mapping[str, Any], output: str, is_error: bool
) -> FailedCall:
    """S5: a failed command keeps the first command of the same program that worked after it (the fix
    the scene must not lose: `--fast-resume` failed, `--verify-each` worked). Only commands: two reads of
    different files are not one the fix of the other."""
    command = arguments.get("command")
    if failure.then or not isinstance(command, str) or not command.strip():
        return failure
    shown = command.strip()
    if shown == failure.arguments or _program(name, shown) != _program(failure.name, failure.arguments):
        return failure
    return failure if failed_call(name, arguments, output, is_error) else replace(failure, then=shown)


def failure_after(
    last: FailedCall | None, name: str, arguments: Mapping[str, Any], output: str, is_error: bool
) -> FailedCall | None:
    """S5, S6: the last failure after this call - a new failure replaces it; else the same program's
    first success after it is kept as its `then` (`worked_after`)."""
    failed = failed_call(name, arguments, output, is_error)
    if failed is not None or last is None:
        return failed or last
    return worked_after(last, name, arguments, output, is_error)


def facts_limits(window: int) -> dict[str, int]:
    share = min(1.0, window / FACTS_REFERENCE_WINDOW)
    return {name: max(FACTS_FLOOR_CHARS[name], int(limit * share)) for name, limit in FACTS_CHARS.items()}


def _code(text: str) -> str:
    """Text shown verbatim in backticks (a backtick inside would end the span: use a longer fence)."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


_QUESTION_END = re.compile(r"(?<=[.!?:])[ \t]+|\n+")
_QUOTE_MARKS = "\"'*_`)]> \t"


def open_question(messages: Sequence[ChatMessage]) -> tuple[int, str] | None:
    """S3: the newest question Vibey put to the user that no message of the user's has followed - its
    record number and the question (the last sentence of a reply of Vibey's that ends with "?"). The
    user's messages are known by their record kind (N7); a background input after it answers nothing."""
    for message in reversed(messages):
        if message.kind == "user":
            return None
        if message.role == "assistant" and message.seq is not None:
            asked = [
                p.strip()
                for p in _QUESTION_END.split(message.content)
                if p.strip().rstrip(_QUOTE_MARKS).endswith("?")
            ]
            if asked:
                return message.seq, asked[-1]
    return None


def _waiting_items(facts: HarnessFacts) -> list[str]:
    items = []
    if facts.question is not None:
        seq, question = facts.question
        items.append(
            f"the user's answer to my question in message #{seq}: {_code(_shorten(question, ERROR_CHARS))}"
        )
    for job in facts.waiting:
        if job.kind != "background job":  # a watch, a timer, a delegated run: its line says what it is
            items.append(f"{_shorten(job.command, ARGUMENT_CHARS)} ({_shorten(job.id, ARGUMENT_CHARS)})")
            continue
        log = f", log {_shorten(job.log, ARGUMENT_CHARS)}" if job.log else ""
        command = _code(_shorten(job.command, ARGUMENT_CHARS))
        newest = _shorten(job.latest, ARGUMENT_CHARS)
        latest = f", latest output {_code(newest)}" if newest else ""
        items.append(f"background job {_shorten(job.id, ARGUMENT_CHARS)}: {command}{log}{latest}")
    return items


def _plan_items(facts: HarnessFacts) -> list[tuple[str, str]]:
    """The plan's steps, where the queue stands first: the step in progress, the pending ones in order,
    then the done ones (a long queue's finished part is what is left out for room)."""
    order = {"in_progress": 0, "pending": 1, "done": 2}
    steps = sorted(facts.plan, key=lambda p: order[p.status])  # stable: the plan's own order within each
    kinds = {"in_progress": "steps in progress", "pending": "pending steps", "done": "done steps"}
    return [(kinds[p.status], ("plan: " if i == 0 else "") + _shorten(p.line(), ARGUMENT_CHARS))
            for i, p in enumerate(steps)]  # fmt: skip


def _reference_items(facts: HarnessFacts) -> list[tuple[str, str]]:
    """(kind, item) in order of importance: the failing call, jobs that finished, the latest commands,
    files modified, files read."""
    items: list[tuple[str, str]] = []
    shown: tuple[str, ...] = ()
    if facts.failure is not None:
        f = facts.failure
        shown = (f.arguments, f.then)
        call = f"{_shorten(f.name, ARGUMENT_CHARS)} {_code(_shorten(f.arguments, ARGUMENT_CHARS))}"
        error = _shorten(f.error_line, ERROR_CHARS) or "(no error text)"
        fix = f"; then worked: {_code(_shorten(f.then, ARGUMENT_CHARS))}" if f.then.strip() else ""
        items.append(("failing call", f"last failing call: {call} -> {error}{fix}"))
    for job in dict.fromkeys(facts.finished):  # short, and what a later "is X done?" needs
        items.append(("finished jobs", f"background job {_shorten(job, ARGUMENT_CHARS)} finished"))
    for command in dict.fromkeys(facts.commands):
        if command not in shown:
            items.append(("commands run", f"ran {_code(_shorten(command, ARGUMENT_CHARS))}"))
    seen: set[str] = set()
    for path in facts.files_modified:
        if path not in seen:
            seen.add(path)
            items.append(("files modified", f"modified {_shorten(path, ARGUMENT_CHARS)}"))
    for path in facts.files_read:
        if path not in seen:
            seen.add(path)
            items.append(("files read", f"read {_shorten(path, ARGUMENT_CHARS)}"))
    return items


def _fit(items: list[tuple[str, str]], limit: int) -> str:
    """HARNESS_MARK and the items that fit whole, in order; the rest counted in a closing note. An item
    too long for the room left does not keep out the shorter ones after it: the demo's scene showed no
    reference at all - a long failing call came first - where the two files changed were the evidence of
    the work done."""
    text = HARNESS_MARK
    left: dict[str, int] = {}
    for kind, raw in items:
        item = raw.strip()
        candidate = f"{text}; {item}" if text != HARNESS_MARK else f"{text} {item}"
        if len(candidate) <= limit - NOTE_ROOM:
            text = candidate
        else:
            left[kind] = left.get(kind, 0) + 1
    if left:
        counts = ", ".join(f"{n} {kind}" for kind, n in left.items())
        text += f" (+ not shown for room: {counts}; see the record)"
    return text


def facts_text(facts: HarnessFacts, window: int) -> dict[str, str]:
    """The harness's lines for each part ("" when it knows nothing for that part)."""
    limits = facts_limits(window)
    waiting = [("background jobs", item) for item in _waiting_items(facts)]
    references = _reference_items(facts)
    plan = _plan_items(facts)
    return {
        "progress": _fit(plan, limits["progress"]) if plan else "",
        "waiting_for": _fit(waiting, limits["waiting_for"]) if waiting else "",
        "exact_references": _fit(references, limits["exact_references"]) if references else "",
    }


def _with(model_text: str, harness: str) -> str:
    own = model_text.strip()
    if not harness or harness in own:
        return own
    if not own or own.lower() == "none":
        return harness
    return f"{own}\n{harness}"


def add_facts(parts: SceneParts, facts: HarnessFacts, window: int) -> SceneParts:
    """The model's parts with the harness's lines after them (never in their place)."""
    if facts.is_empty:
        return parts
    extra = facts_text(facts, window)
    return replace(
        parts,
        progress=_with(parts.progress, extra["progress"]),
        waiting_for=_with(parts.waiting_for, extra["waiting_for"]),
        exact_references=_with(parts.exact_references, extra["exact_references"]),
    )


def missing_facts(parts: SceneParts, facts: HarnessFacts, window: int) -> list[Problem]:
    """V1 with S3/S6: every line the harness has for a part stands in that part."""
    problems = []
    for name, text in facts_text(facts, window).items():
        if text and text not in getattr(parts, name):
            label = name.replace("_", " ").capitalize()
            problems.append(
                Problem(
                    "scene.facts_missing",
                    f"'{label}:' lacks what Avibe knows; keep this line in it as it is: {text}",
                )
            )
    return problems


def with_facts(scene: str, facts: HarnessFacts, window: int) -> str:
    """The scene block with the harness's lines added (S3, S6); a scene that does not parse is left as it
    is (validation reports it, and the repair round's scene gets them)."""
    if facts.is_empty:
        return scene
    parts = parse_scene(scene)
    if isinstance(parts, list):
        return scene
    return render_scene(add_facts(parts, facts, window))
