"""Vibey's per-session bookkeeping, one pure module that Vibey and the eval both run (DESIGN: "the eval
measures the code users run"): inputs absorbed, a reply and a tool call recorded in the live state, what a
checkpoint carries (A1 skills, A2 files, F5 the current request, the plan) and the harness facts for the
scene (S2, S3, S5, S6). Making room over a live state is `avibe.agent.compaction` (its `LiveRoom` commits
through a small port: Vibey's is the record, the eval's an in-memory checkpoint). Nothing here does IO.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from avibe.agent.interrupted import Interrupted, settle_unanswered
from avibe.agent.plan_note import plan_note, remember_event, resent_note
from avibe.agent.repeats import repeat_note
from avibe.agent.state import LiveState, LoadedSkill, remember_file
from avibe.checkpoint.carry import file_list
from avibe.checkpoint.facts import FailedCall, HarnessFacts, WaitingJob, failure_after, open_question
from avibe.host.agent import Input, render_input
from avibe.ports import StoredCheckpoint, ToolResult
from avibe.record.checkpoint import Carry, SkillRef
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelFacts, ToolCall
from avibe.record.sources import frame_tag_lines

__all__ = [
    "absorb",
    "after_reply",
    "after_tool",
    "carry",
    "clamp_window",
    "harness_facts",
    "shell_skill_load",
    "took_input",
    "track_tool",
]

log = logging.getLogger("avibe.agent")
SHELL_SKILL_LOAD: Final = re.compile(r"(?:^|[;&|\s])vibe\s+skill\s+load\s+['\"]?([\w.-]+)")


def clamp_window(facts: ModelFacts, window: int | None) -> ModelFacts:
    """The model's facts on a smaller window (a forced window, the eval's): the reply reserve shrinks too."""
    if window is None:
        return facts
    window = min(window, facts.window)
    return replace(facts, window=window, max_output=min(facts.max_output, window // 4))


# ---- inputs ---------------------------------------------------------------------------------------------


def took_input(state: LiveState, item: Input) -> LiveState:
    """The bookkeeping of one input: the current request (F5) and the background jobs that reported (S6)."""
    if item.kind == "callback" and item.ref:
        state = replace(state, finished_jobs=remember_file(state.finished_jobs, item.ref, keep=10))
    if item.is_user:
        state = replace(state, turn_user_seqs=(*state.turn_user_seqs, item.seq))
    return state


def absorb(
    state: LiveState, new: Sequence[Input], agent: str, note: Callable[[Interrupted], Entry]
) -> LiveState:
    """Append record entries not yet in the live context (the loop's own replies are already there). Tool
    calls a dead process left without results are named through `note` (it records the harness's note
    once per step and gives back its entry) - never dropped in silence."""
    settled, died_in_step = settle_unanswered(state.messages)  # the process died between two calls
    if not new and died_in_step is None:
        return state
    present = {m.seq for m in state.messages if m.seq is not None}
    messages = list(settled)
    interrupted = [] if died_in_step is None else [died_in_step]
    for item in new:
        if item.seq in present:
            continue
        if item.role == "assistant" and item.calls and item.agent == agent:  # died with a process
            interrupted.append(Interrupted(item.seq, item.calls))
        state = took_input(state, item)
        if item.role == "assistant" and not item.text.strip():
            continue
        messages.append(ChatMessage(item.role, item.text, seq=item.seq, kind=item.kind))
    notes = [note(step) for step in interrupted]
    taken = present | {item.seq for item in new}  # a note made by an earlier resume came in as input
    for entry in (n for n in notes if n.seq not in taken):
        messages.append(ChatMessage("user", render_input(entry).text, seq=entry.seq, kind=entry.kind))
    last = max([state.last_seq, *(i.seq for i in new), *(n.seq for n in notes)])
    return replace(state, messages=tuple(messages), last_seq=last)


# ---- a reply, a tool call -------------------------------------------------------------------------------


def after_reply(state: LiveState, text: str, calls: Sequence[ToolCall], seq: int | None) -> LiveState:
    """The model's reply (record entry `seq`) joins the live context with its tool calls."""
    message = ChatMessage("assistant", text, tool_calls=tuple(calls), seq=seq, kind="assistant")
    return replace(state, messages=(*state.messages, message))


def after_tool(state: LiveState, call: ToolCall, result: ToolResult) -> LiveState:
    """The tool's output joins the live context (A3: never the record), then its bookkeeping."""
    text = frame_tag_lines(result.output) + repeat_note(state.messages, call, result.is_error)
    if result.plan is not None and not result.is_error:
        resent = result.plan == state.plan and state.calls_since_plan == 0 and bool(state.plan)
        text += resent_note(result.plan, state.file_events) if resent else ""
        text += plan_note(result.plan, state.file_events)
    output = ChatMessage("tool", text, tool_call_id=call.id, name=call.name)
    return track_tool(replace(state, messages=(*state.messages, output)), call, result)


def calls_not_run(state: LiveState, calls: Sequence[ToolCall], why: str) -> LiveState:
    """A result for each call of the latest step that the harness did not run (a loop stop): every call
    is answered, as providers require, and the model reads why. Nothing ran, so nothing is tracked."""
    outputs = [ChatMessage("tool", why, tool_call_id=c.id, name=c.name) for c in calls]
    return replace(state, messages=(*state.messages, *outputs))


def track_tool(state: LiveState, call: ToolCall, result: ToolResult) -> LiveState:
    """What a tool call tells the harness: the plan, the commands run (S6), the files read and written
    (A2), the skills loaded in order (A1: the skill tool, or `vibe skill load NAME` in the shell, which
    loads the same text), and the last failure (S5)."""
    if result.plan is not None:  # the harness keeps the plan; checkpoints carry it verbatim
        state = replace(state, plan=result.plan, calls_since_plan=0)
    else:
        state = replace(state, calls_since_plan=state.calls_since_plan + 1)
    command = call.arguments.get("command") if call.name == "shell" else None
    if isinstance(command, str) and command.strip():
        state = replace(state, commands=remember_file(state.commands, command.strip(), keep=5))
    for path in result.files_read:
        events = remember_event(state.file_events, "read", path)
        state = replace(state, files_read=remember_file(state.files_read, path), file_events=events)
    for path in result.files_modified:
        events = remember_event(state.file_events, "modified", path)
        state = replace(state, files_modified=remember_file(state.files_modified, path), file_events=events)
    loaded = result.skill_loaded or (None if result.is_error else shell_skill_load(call))
    if loaded:
        order = max((s.order for s in state.skills), default=0) + 1
        others = tuple(s for s in state.skills if s.name != loaded)
        state = replace(state, skills=(*others, LoadedSkill(loaded, order, call.id)))
    return replace(state, last_failure=_failure_after(state.last_failure, call, result))


def _failure_after(
    last: tuple[str, str, str, str] | None, call: ToolCall, result: ToolResult
) -> tuple[str, str, str, str] | None:
    failed = failure_after(
        FailedCall(*last) if last else None, call.name, call.arguments, result.output, result.is_error
    )
    return None if failed is None else (failed.name, failed.arguments, failed.error_line, failed.then)


def shell_skill_load(call: ToolCall) -> str | None:
    """A1: the skill a shell command loaded with `vibe skill load NAME`, if it did."""
    command = call.arguments.get("command") if call.name == "shell" else None
    found = SHELL_SKILL_LOAD.search(command) if isinstance(command, str) else None
    return found.group(1) if found else None


# ---- what a checkpoint carries --------------------------------------------------------------------------


def carry(state: LiveState, previous: StoredCheckpoint | None, window: int) -> Carry:
    """Skills (A1, most recent order wins), the file list (A2, fixed at checkpoint time), the current
    request (F5: kept verbatim, wins on conflict), the plan."""
    skills = {s.name: s for s in (previous.carry.skills if previous else ())}
    for skill in state.skills:
        skills[skill.name] = SkillRef(skill.name, skill.order)
    return Carry(
        skills=tuple(sorted(skills.values(), key=lambda s: -s.order)),
        files=file_list(state.files_modified, state.files_read),
        current_request_seqs=state.turn_user_seqs,
        mid_turn=bool(state.turn_user_seqs),
        window=window,
        plan=state.plan,
    )


def harness_facts(state: LiveState, waiting: Sequence[tuple[str, ...]] = ()) -> HarnessFacts:
    """What the harness knows, for the scene (S2, S3, S6): the plan, waiting jobs, files (A2), the last
    failure, the commands run, the jobs that reported back, the question the user has not answered yet."""
    failure = FailedCall(*state.last_failure) if state.last_failure else None
    jobs = tuple(WaitingJob(*job) for job in waiting)
    return HarnessFacts(
        jobs,
        state.files_read,
        state.files_modified,
        failure,
        state.plan,
        state.commands,
        state.finished_jobs,
        open_question(state.messages),  # S3: a question to the user waits for the answer, with its number
    )


def turn_start(state: LiveState) -> int | None:
    seqs = set(state.turn_user_seqs)
    return next((i for i, m in enumerate(state.messages) if m.seq in seqs), None)


def without_skills_in_context(
    stored: StoredCheckpoint, state: LiveState, kept: Sequence[ChatMessage]
) -> StoredCheckpoint:
    """A1: put back only the skills whose loaded text is leaving the context; one whose load output the
    checkpoint keeps is still there (putting it back too would hold it twice). It is carried again at a
    later checkpoint, once its output has moved out."""
    kept_calls = {m.tool_call_id for m in kept if m.role == "tool"}
    present = {s.name for s in state.skills if s.call_id and s.call_id in kept_calls}
    if not present:
        return stored
    skills = tuple(s for s in stored.carry.skills if s.name not in present)
    return replace(stored, carry=replace(stored.carry, skills=skills))
