"""Loop detection: pure functions over the live context, for a model that goes in circles.

Small models repeat one call, alternate two or three calls (the demo alternated `read_file
tickets/007.md` / `list_files` twelve times) or retry a call that keeps failing. The loop asks two
questions of the live context:

    repeat_note(history, call, failed) -> str     the note to append to this call's tool output, or ""
    loop_stop_reason(history) -> str | None       a one-line reason to stop the turn, or None

A "call" is its name and arguments (argument order ignored); the id does not count. Only the calls
since the person's latest message count: a repeat after the person asked again is not a loop, and a
turn stopped for looping can go on when the person answers.

How a failure is recognised: the caller says whether THIS call failed (`failed`, the tool result's
`is_error`). An earlier call's failure cannot be read reliably from its output - each tool words its
errors its own way, and a shell command's non-zero exit is not an error result - so it is not guessed.
Instead:
  * a call that fails while the same call was already made since the person's message gets a note
    ("failed again"): on unchanged files the same call gives the same error, so the 2nd identical
    failure is told to stop;
  * that note is the harness's own mark in the history (FAILED_AGAIN, at the end of the tool message
    with the call's id), so `loop_stop_reason` stops the turn before a 3rd run of a call whose output
    carries it, i.e. before four repeats;
  * a tool that gave the same error-shaped output ("<tool>: ...", the tools' error convention) to the
    last SAME_ERROR_RUNS calls in a row is not run again, whatever the arguments: the demo sent
    `send_to_session` to a session that does not exist with a new text each time, so no call repeated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from avibe.record.entries import NON_HUMAN_INPUT_KINDS
from avibe.record.messages import ChatMessage, ToolCall, cut_answer

MAX_SAME_CALLS: Final = 4
SAME_ERROR_RUNS: Final = 3  # the same tool, the same error, this many times in a row: the next is a loop
CYCLE_PERIODS: Final = (2, 3)  # A,B,A,B and A,B,C,A,B,C; period 1 is the plain repeat
NOTE_START: Final = "\n[Avibe: "
FAILED_AGAIN: Final = "this call failed, and you already made exactly this call"
_SHOWN_CHARS: Final = 80

Key = tuple[str, str]


def _key(call: ToolCall) -> Key:
    return call.name, json.dumps(call.arguments, sort_keys=True, default=str)


def _show(key: Key) -> str:
    name, args = key
    text = name if args in ("{}", "null") else f"{name} {args}"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _is_persons_message(message: ChatMessage) -> bool:
    return message.role == "user" and message.kind not in NON_HUMAN_INPUT_KINDS


def _segment(history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """The messages since the person's latest message (the whole history if there is none)."""
    for index in range(len(history) - 1, -1, -1):
        if _is_persons_message(history[index]):
            return history[index + 1 :]
    return history


def _calls(messages: Sequence[ChatMessage]) -> list[ToolCall]:
    return [call for m in messages if m.role == "assistant" for call in m.tool_calls]


def _calls_before(history: Sequence[ChatMessage], call: ToolCall) -> list[Key]:
    """The calls made before `call` since the person's message; a parallel call listed after it in the
    same reply has not run yet, so it does not count."""
    keys: list[Key] = []
    for earlier in _calls(_segment(history)):
        if earlier.id == call.id:
            break
        keys.append(_key(earlier))
    return keys


def _streak(keys: Sequence[Key]) -> int:
    """How many calls at the end are the same call."""
    count = 0
    for key in reversed(keys):
        if key != keys[-1]:
            break
        count += 1
    return count


def _cycle(keys: Sequence[Key]) -> tuple[int, int]:
    """(period, full runs) of the cycle of 2 or 3 different calls the sequence ends with; (0, 0) if
    none has run twice. A block of one call repeated is a streak, not a cycle."""
    for period in CYCLE_PERIODS:
        block = list(keys[-period:])
        if len(keys) < 2 * period or len(set(block)) == 1:
            continue
        runs = 1
        while len(keys) >= (runs + 1) * period and list(keys[-(runs + 1) * period : -runs * period]) == block:
            runs += 1
        if runs >= 2:
            return period, runs
    return 0, 0


def repeat_note(history: Sequence[ChatMessage], call: ToolCall, failed: bool) -> str:
    """The harness note to append to this call's tool output (it starts with "\\n[Avibe: "), or "".

    `history` is the live context before this call's result (its reply, with `call`, included);
    `failed` is whether this call's result is an error. The note says when the call fails again after
    the same call was already made, repeats the previous call, or closes a cycle of 2-3 calls.
    """
    before = _calls_before(history, call)
    keys = [*before, _key(call)]
    parts: list[str] = []
    if failed and keys[-1] in before:
        made = before.count(keys[-1])
        parts.append(
            f"{FAILED_AGAIN} ({made} time{'s' if made > 1 else ''} before). The same call gives the same "
            "error: do not make it again (the turn is stopped if you do). Change the arguments, check the "
            "path with list_files, try another tool, or answer."
        )
    elif before and before[-1] == keys[-1]:
        parts.append("This is the same call, with the same arguments, as your previous one.")
    period, runs = _cycle(keys)
    if period:
        shown = " -> ".join(_show(k) for k in keys[-period:])
        parts.append(
            f"Your last {period * runs} calls are one cycle of {period} calls run {runs} times ({shown})."
        )
    if not parts:
        return ""
    if not parts[0].startswith(FAILED_AGAIN):
        parts.append("Do not repeat it: use the results you already have, do the next step, or answer.")
    return NOTE_START + " ".join(parts) + "]"


def _outputs(messages: Sequence[ChatMessage]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in messages if m.role == "tool" and m.tool_call_id}


def _failed_again(content: str) -> bool:
    """Whether a tool output ends with the harness's "failed again" note (see the module docstring)."""
    start = content.rfind(NOTE_START)
    return start >= 0 and FAILED_AGAIN in content[start:]


def _retried_failure(segment: Sequence[ChatMessage]) -> ToolCall | None:
    """A call not run yet that repeats a call whose output carries the "failed again" note."""
    outputs = _outputs(segment)
    failed_twice = {_key(c) for c in _calls(segment) if _failed_again(outputs.get(c.id, ""))}
    pending = (c for c in _calls(segment) if c.id not in outputs)
    return next((c for c in pending if _key(c) in failed_twice), None)


def _without_note(content: str) -> str:
    start = content.rfind(NOTE_START)
    return content[:start] if start >= 0 else content


def _same_error_streak(segment: Sequence[ChatMessage]) -> str | None:
    """The tool whose last SAME_ERROR_RUNS run calls all gave the same error-shaped output, when the
    reply not run yet calls it again; else None."""
    outputs = _outputs(segment)
    done = [(c.name, _without_note(outputs[c.id])) for c in _calls(segment) if c.id in outputs]
    pending = [c.name for c in _calls(segment) if c.id not in outputs]
    last = done[-SAME_ERROR_RUNS:]
    if len(last) < SAME_ERROR_RUNS or len(set(last)) != 1:
        return None
    name, output = last[0]
    return name if output.startswith(f"{name}:") and name in pending else None


def loop_stop_reason(history: Sequence[ChatMessage]) -> str | None:
    """A one-line reason to stop the turn before running the latest reply's calls, or None.

    Stops when the same call came MAX_SAME_CALLS times in a row, when a cycle of 2 or 3 calls has run
    MAX_SAME_CALLS full times, when a call that already failed twice (its output carries the
    "failed again" note) is made a third time, or when a tool that gave the same error to its last
    SAME_ERROR_RUNS calls in a row is called again (other arguments, same dead end).
    """
    segment = _segment(history)
    keys = [_key(c) for c in _calls(segment)]
    if not keys:
        return None
    streak = _streak(keys)
    if streak >= MAX_SAME_CALLS:
        return f"the same tool call came {streak} times in a row ({_show(keys[-1])})"
    period, runs = _cycle(keys)
    if runs >= MAX_SAME_CALLS:
        shown = " -> ".join(_show(k) for k in keys[-period:])
        return f"the same cycle of {period} tool calls came {runs} times in a row ({shown})"
    retried = _retried_failure(segment)
    if retried is not None:
        return f"a tool call that failed twice was made again ({_show(_key(retried))})"
    same_error = _same_error_streak(segment)
    if same_error is not None:
        return f"{same_error} gave the same error {SAME_ERROR_RUNS} times in a row and was called again"
    return None


# The request after a loop stop: the tools stay listed (the prompt, and a local model's cache, stay as
# they were) but the output can only be an answer - a small model offered no tools wrote a tool call's
# JSON as its "answer".
ANSWER_ONLY: Final = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1}},
    "required": ["answer"],
    "additionalProperties": False,
}


def answer_of(raw: str) -> str:
    """The answer in a reply to ANSWER_ONLY: its "answer" field (cut at the output limit: what it wrote,
    marked as cut); a provider that ignored the schema and wrote plain text is taken as written; any other
    JSON (a tool call written as text) is no answer."""
    try:
        found = json.loads(raw, strict=False)
    except ValueError:
        cut = cut_answer(raw)
        return raw.strip() if cut is None else cut
    answer = found.get("answer") if isinstance(found, dict) else None
    return answer.strip() if isinstance(answer, str) else ""


def not_run_text(reason: str) -> str:
    """The result of a call the loop stop did not run: why, and what to do instead (answer in words)."""
    return (
        f"[not run by Avibe: {reason}. Stop calling tools now: answer the user's latest message in words "
        "- what you did, what is left, or what you need from them.]"
    )
