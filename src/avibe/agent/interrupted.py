"""Tool calls whose process died: named, never dropped in silence.

A `kill -9` (or a crash, or a power cut) while a tool runs leaves the record with the assistant's step and
its calls, and the live state without their results. Resuming as if the calls never happened invites the
model to run a non-idempotent command twice (`>> log`, a migration, a payment); resuming as if they had
finished is a lie. So the harness says what it knows: which calls did not report back, that the first one
may have run in part or in full, and that the ones after it never started. Pure; the loop records the
note as a harness entry (one per interrupted step, by delivery key) so `vibe log` shows it too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from avibe.record.entries import CallRecord, Source
from avibe.record.messages import ChatMessage

NOTE_SOURCE: Final = Source("harness", name="avibe")
MAX_ARGUMENTS_CHARS: Final = 300  # a call's arguments as shown in the note: enough to recognise it
UNKNOWN: Final = "outcome unknown: it may have run in part or in full; check before running it again"
NOT_RUN: Final = "not run: the process stopped before it started"
# The person stopped the step (the chat's Ctrl-C): the same note's shape, with what is known.
STOPPED: Final = (
    "stopped by the user (Ctrl-C) while it ran: killed with everything it started; it may have run in "
    "part; check before running it again"
)
NOT_STARTED: Final = "not run: the user stopped the step before it started"


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The calls of one assistant step (record entry `seq`) that did not report back, in order: the first
    may have been running when the process died, the rest never started."""

    seq: int
    calls: tuple[CallRecord, ...]

    @property
    def key(self) -> str:
        """The note's delivery key: a second resume of the same step records nothing new."""
        return f"interrupted:{self.seq}"


def _shown(call: CallRecord) -> str:
    arguments = call.arguments
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        arguments = arguments[:MAX_ARGUMENTS_CHARS] + " ..."
    return f"{call.name} {arguments}"


def note_text(interrupted: Interrupted) -> str:
    """The harness's note: which calls of step #seq did not report back and what that means."""
    lines = [
        f"The process running this session stopped during your step #{interrupted.seq}; "
        "these tool calls did not report back:"
    ]
    for index, call in enumerate(interrupted.calls):
        lines.append(f"- {_shown(call)}: {UNKNOWN if index == 0 else NOT_RUN}")
    return "\n".join(lines)


def stopped_text(seq: int, stopped: CallRecord | None, not_run: Sequence[CallRecord]) -> str:
    """The note after the person stopped step #seq: the call that was running then, if any,
    was stopped; the ones after it never started."""
    lines = [
        f"The user pressed Ctrl-C during your step #{seq} and stopped it; these tool calls did not finish:"
    ]
    lines += [f"- {_shown(stopped)}: {STOPPED}"] if stopped is not None else []
    lines += [f"- {_shown(call)}: {NOT_STARTED}" for call in not_run]
    return "\n".join(lines)


def result_text(first: bool) -> str:
    """The tool result put in place of one that never came (the conversation must answer every call)."""
    return f"[interrupted: the process running this session stopped; {UNKNOWN if first else NOT_RUN}]"


def unanswered(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, tuple[int, ...]] | None:
    """The live context's last assistant step when some of its calls have results and some do not - the
    process died between two calls of one step - with the indexes of the calls left unanswered. A step
    with no result at all is not one: the loop stops a looping model that way on purpose."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role == "assistant":
            if not message.tool_calls:
                return None
            answered = {m.tool_call_id for m in messages[position + 1 :] if m.role == "tool"}
            missing = tuple(i for i, c in enumerate(message.tool_calls) if c.id not in answered)
            if missing and len(missing) < len(message.tool_calls):
                return message, missing
            return None
    return None


def settle_unanswered(messages: Sequence[ChatMessage]) -> tuple[tuple[ChatMessage, ...], Interrupted | None]:
    """`messages` with a result for every call the process died in (see `unanswered`), and what to note."""
    found = unanswered(messages)
    if found is None:
        return tuple(messages), None
    step, missing = found
    results = []
    calls = []
    for order, index in enumerate(missing):
        call = step.tool_calls[index]
        results.append(ChatMessage("tool", result_text(order == 0), tool_call_id=call.id, name=call.name))
        calls.append(CallRecord(call.name, json.dumps(dict(call.arguments), ensure_ascii=False)))
    seq = step.seq if step.seq is not None else 0
    return (*messages, *results), Interrupted(seq, tuple(calls))
