"""The checkpoint turn as a generator of effects (F2, F3, V1-V5, T4, N4, N7).

The turn does no IO. It yields effects; a driver performs them and sends the results back (httpx's auth
flow). Drive it like this:

    gen = checkpoint_turn(inputs)
    effect = next(gen)
    try:
        while True:
            effect = gen.send(perform(effect))   # None for WriteWorkFiles; ModelReply | ModelFailure for
    except StopIteration as stop:                # CallModel; str | ReadFailed for ReadFile
        outcome = stop.value                     # Accepted | Failed

API:
    Effects:  WriteWorkFiles(mind, checklist)   CallModel(messages, tools, json_schema, max_tokens)
              ReadFile(path)
    Results:  ModelReply (avibe.record.messages) | ModelFailure(text)   str | ReadFailed(message)   None
    TurnInputs(...)                     see the class
    checkpoint_turn(inputs) -> Generator[Effect, EffectResult, TurnOutcome]
    Accepted(checkpoint, dismissed_seqs, calls, first_pass_problems, repaired, tool_rounds, notes)
    Failed(problems, calls, tool_rounds, first_pass_problems, notes)
    CHECKPOINT_TOOLS, MAX_TOOL_ROUNDS = 5

Every model call is the current conversation plus the turn's own messages appended after it: each call's
messages extend the previous call's, so the live prompt's cached prefix is reused. The memo's text is
always copied from the record entries by `build_memo`, never taken from the model (N4, N7). A failed turn
carries no partial state: nothing changes (V5).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from avibe.checkpoint import structured
from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo import (
    Candidate,
    build_memo,
    dismissed,
    memo_candidates,
    read_ticks,
    render_checklist,
)
from avibe.checkpoint.mind import EMPTY_MIND, apply_edit
from avibe.checkpoint.model import Checkpoint, MemoItem, Problem
from avibe.checkpoint.plan import cut_tool_output
from avibe.checkpoint.scene import CLOSE_TAG, OPEN_TAG, SCENE_MIN_CHARS, SCENE_TEMPLATE, scene_blocks
from avibe.checkpoint.validate import repair_request, validate
from avibe.context.prompts import render
from avibe.ports import TokenCounter
from avibe.record.entries import Entry, Source
from avibe.record.messages import ChatMessage, ModelReply, ToolCall, ToolSpec
from avibe.record.sources import render_tag

MAX_TOOL_ROUNDS: Final = 5
READ_CAP_SHARE: Final = 10  # a file read in the turn gets at most window // 10 tokens ...
READ_CAP_FLOOR: Final = 200  # ... but never less than this
Mode = Literal["tools", "structured"]


# ---- effects and their results ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteWorkFiles:
    """F2: mirror the two work files into the session's temp dir (at the start, after each accepted edit)."""

    mind: str
    checklist: str


@dataclass(frozen=True, slots=True)
class CallModel:
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    json_schema: Mapping[str, Any] | None
    max_tokens: int


@dataclass(frozen=True, slots=True)
class ReadFile:
    path: str


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """What the driver sends back when the model call raised (a ModelError's text)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReadFailed:
    message: str


Effect = WriteWorkFiles | CallModel | ReadFile
EffectResult = ModelReply | ModelFailure | str | ReadFailed | None


# ---- inputs and outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnInputs:
    """Everything the turn needs; no clock, no IO.

    live_messages:  the conversation exactly as last sent to the model (system prompt, recollection,
                    recent messages); the turn's calls append to it (prompt-cache reuse).
    previous:       the previous checkpoint, or None the first time (empty mind template, empty memo).
    moved_entries:  record entries of the messages that move out (any kind; only "user" ones are memo
                    candidates, N7).
    memo_entries:   record entries behind the previous memo's items, so V3's byte-for-byte check covers
                    them too (without them only the cut-note form of those items is checked).
    dismissed:      seqs unticked at earlier checkpoints, never listed again (N6).
    upto_seq:       the last record number that moves out (named in the request).
    cache_tools:    structured mode: the live conversation's tool specs, offered unchanged so the prompt
                    prefix (which includes tools) stays the cached one; the grammar keeps the model from
                    calling them.
    """

    mode: Mode
    live_messages: tuple[ChatMessage, ...]
    previous: Checkpoint | None
    moved_entries: tuple[Entry, ...]
    budgets: Budgets
    counter: TokenCounter
    at: datetime
    mind_path: str = "mind.md"
    checklist_path: str = "memo.md"
    memo_entries: tuple[Entry, ...] = ()
    dismissed: frozenset[int] = frozenset()
    upto_seq: int | None = None
    max_tokens: int = 2048
    cache_tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Accepted:
    checkpoint: Checkpoint
    dismissed_seqs: frozenset[int]
    calls: int
    first_pass_problems: tuple[Problem, ...]
    repaired: bool
    tool_rounds: int = 0
    notes: tuple[str, ...] = ()  # harness decisions worth logging (e.g. an out-of-range answer dropped)


@dataclass(frozen=True, slots=True)
class Failed:
    """V4/V5: the turn failed; it carries no partial state, so nothing changes."""

    problems: tuple[Problem, ...]
    calls: int
    tool_rounds: int = 0
    first_pass_problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()


TurnOutcome = Accepted | Failed

CHECKPOINT_TOOLS: Final[tuple[ToolSpec, ...]] = (
    ToolSpec(
        "read_file",
        "Read any file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        "edit_file",
        "Replace the exact text `old` by `new` in the mind file or the memo checklist (the only files you "
        "may change).",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    ),
    ToolSpec("done", "Call when the two files are edited; then answer with the scene block."),
)


# ---- the turn's working state -----------------------------------------------------------------------


@dataclass
class _State:
    """Mutable working state inside one turn; never leaves the generator except through an outcome."""

    inputs: TurnInputs
    previous_mind: str
    candidates: list[Candidate]
    checklist: str
    mind: str
    messages: list[ChatMessage]
    scene: str = ""
    calls: int = 0
    rounds: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def previous_memo(self) -> tuple[MemoItem, ...]:
        return self.inputs.previous.memo if self.inputs.previous else ()

    @property
    def entries(self) -> dict[int, Entry]:
        return {e.seq: e for e in (*self.inputs.memo_entries, *self.inputs.moved_entries)}


def _start(inputs: TurnInputs) -> _State:
    previous_mind = inputs.previous.mind if inputs.previous else EMPTY_MIND
    memo = inputs.previous.memo if inputs.previous else ()
    candidates = memo_candidates(inputs.moved_entries, memo, inputs.dismissed)
    return _State(
        inputs=inputs,
        previous_mind=previous_mind,
        candidates=candidates,
        checklist=render_checklist(candidates),
        mind=previous_mind,
        messages=list(inputs.live_messages),
    )


def harness_message(inputs: TurnInputs, text: str) -> ChatMessage:
    """A message from Avibe in the turn: tagged from stored fields, kind "harness", never the user (T4)."""
    tag = render_tag(Source(kind="harness", name="checkpoint"), inputs.at)
    return ChatMessage(role="user", content=f"{tag}\n{text}", kind="harness")


def _moving(inputs: TurnInputs) -> str:
    if inputs.upto_seq is None:
        return "The oldest messages will leave the context."
    return f"Messages up to #{inputs.upto_seq} will leave the context."


def request_text(inputs: TurnInputs, mind: str, checklist: str) -> str:
    """The tools-mode checkpoint request, without its tag line (added by `harness_message`)."""
    caps = ", ".join(f"{name} {cap}" for name, cap in inputs.budgets.mind_caps.items())
    return render(
        "checkpoint_request",
        notice=render("harness_notice").strip(),
        moving=_moving(inputs),
        mind_path=inputs.mind_path,
        checklist_path=inputs.checklist_path,
        caps=caps,
        min_chars=SCENE_MIN_CHARS,
        scene_template=SCENE_TEMPLATE.strip(),
        rounds=MAX_TOOL_ROUNDS,
        mind=mind.strip(),
        checklist=checklist.strip() or "(no user messages leave the context this time)",
    )


def _call(
    st: _State, tools: tuple[ToolSpec, ...], schema: Mapping[str, Any] | None
) -> Generator[Effect, EffectResult, ModelReply | ModelFailure]:
    st.calls += 1
    result = yield CallModel(tuple(st.messages), tools, schema, st.inputs.max_tokens)
    if not isinstance(result, ModelReply | ModelFailure):
        raise TypeError(f"CallModel needs a ModelReply or ModelFailure back, got {type(result).__name__}")
    return result


def _dedup(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    return tuple(dict.fromkeys(problems))


def _scene_of(text: str) -> str:
    """The one scene block as stored (outer chatter dropped); the raw text when it is not exactly one."""
    blocks = scene_blocks(text)
    return f"{OPEN_TAG}{blocks[0]}{CLOSE_TAG}\n" if len(blocks) == 1 else text


def _draft(st: _State, ticked: frozenset[int], scene: str) -> tuple[Checkpoint, list[Problem]]:
    """Memo copied from the record (N4), then every problem at once (V1-V3)."""
    inputs = st.inputs
    memo = build_memo(ticked, st.entries, inputs.counter, inputs.budgets, st.previous_memo)
    draft = Checkpoint(mind=st.mind, memo=memo.items, scene=scene)
    covered = all(item.seq in st.entries for item in draft.memo)
    found = validate(
        inputs.previous, draft, inputs.budgets, inputs.counter, record=st.entries if covered else None
    )
    return draft, list(_dedup([*memo.problems, *found]))


def _accept(st: _State, draft: Checkpoint, first: Sequence[Problem], repaired: bool) -> Accepted:
    ticked = frozenset(item.seq for item in draft.memo)
    return Accepted(
        checkpoint=draft,
        dismissed_seqs=dismissed(st.candidates, ticked),
        calls=st.calls,
        first_pass_problems=tuple(first),
        repaired=repaired,
        tool_rounds=st.rounds,
        notes=tuple(st.notes),
    )


def _fail(st: _State, problems: Sequence[Problem], first: Sequence[Problem] = ()) -> Failed:
    return Failed(_dedup(problems), st.calls, st.rounds, tuple(first), tuple(st.notes))


def _model_failed(st: _State, failure: ModelFailure, first: Sequence[Problem] = ()) -> Failed:
    return _fail(st, [Problem("model.error", f"The model call failed: {failure.text}")], first)


# ---- tools mode -------------------------------------------------------------------------------------


def _same_file(path: str, target: str) -> bool:
    """The model may name a work file by its full path or by its name ("mind.md")."""
    path = path.strip().removeprefix("./")
    return path == target or (bool(path) and "/" not in path and target.endswith("/" + path))


def _str_args(call: ToolCall, names: Sequence[str]) -> list[str] | str:
    values = [call.arguments.get(name) for name in names]
    if all(isinstance(v, str) for v in values):
        return [v for v in values if isinstance(v, str)]
    wanted = ", ".join(f"'{n}'" for n in names)
    return f"Refused: {call.name} needs the string arguments {wanted}."


def _read(st: _State, call: ToolCall) -> Generator[Effect, EffectResult, str]:
    args = _str_args(call, ["path"])
    if isinstance(args, str):
        return args
    (path,) = args
    if _same_file(path, st.inputs.mind_path):
        return st.mind
    if _same_file(path, st.inputs.checklist_path):
        return st.checklist
    result = yield ReadFile(path)
    if isinstance(result, ReadFailed):
        return f"Could not read {path}: {result.message}"
    if not isinstance(result, str):
        raise TypeError(f"ReadFile needs a str or ReadFailed back, got {type(result).__name__}")
    return _capped(st.inputs, call, result)


def _capped(inputs: TurnInputs, call: ToolCall, text: str) -> str:
    """A file read in the turn is cut to a tenth of the window (V9), so one read cannot overflow it."""
    cap = max(READ_CAP_FLOOR, inputs.budgets.window // READ_CAP_SHARE)
    message = ChatMessage(role="tool", content=text, tool_call_id=call.id, name=call.name)
    return cut_tool_output(message, inputs.counter, cap).content


def _edit_checklist(st: _State, old: str, new: str) -> str | None:
    """Apply a checklist edit when it changes nothing but checkboxes (N4); the refusal text otherwise."""
    count = st.checklist.count(old) if old else 0
    if count != 1:
        where = "is not in" if count == 0 else f"appears {count} times in"
        return f"Refused: the 'old' text {where} the memo checklist. Copy one exact line from it."
    edited = st.checklist.replace(old, new, 1)
    ticks = read_ticks(render_checklist(st.candidates), edited)
    if ticks.problems:
        reasons = " ".join(p.message for p in ticks.problems)
        return f"Refused: only the checkboxes may change ([x] keep, [ ] let go). {reasons}"
    st.checklist = edited
    return None


def _edit(st: _State, call: ToolCall) -> Generator[Effect, EffectResult, str]:
    args = _str_args(call, ["path", "old", "new"])
    if isinstance(args, str):
        return args
    path, old, new = args
    if _same_file(path, st.inputs.mind_path):
        outcome = apply_edit(st.mind, old, new)
        if not outcome.applied:
            return outcome.message
        st.mind = outcome.document
    elif _same_file(path, st.inputs.checklist_path):
        refusal = _edit_checklist(st, old, new)
        if refusal is not None:
            return refusal
    else:
        return (
            f"Refused: during a checkpoint you may change only {st.inputs.mind_path} and "
            f"{st.inputs.checklist_path}, and only with edit_file. {path} was not changed."
        )
    yield WriteWorkFiles(st.mind, st.checklist)
    return "Edit applied."


def _run_tool(st: _State, call: ToolCall) -> Generator[Effect, EffectResult, str]:
    if call.name == "read_file":
        return (yield from _read(st, call))
    if call.name == "edit_file":
        return (yield from _edit(st, call))
    if call.name == "done":
        return "Noted. Now answer with the scene block only."
    return (
        f"Refused: there is no tool '{call.name}' in a checkpoint. Use read_file, edit_file and done; the "
        "two files can be changed only with edit_file - no writes, no overwrites, no other files."
    )


def _tool_message(call: ToolCall, output: str) -> ChatMessage:
    return ChatMessage(role="tool", content=output, tool_call_id=call.id, name=call.name)


def _offers_scene(reply: ModelReply, current: str) -> bool:
    """A reply replaces the scene when it holds (or opens) a scene block, or when it is a final answer
    and the scene so far has no block. A repair reply that only says "fixed" keeps a good earlier scene."""
    if scene_blocks(reply.text) or OPEN_TAG in reply.text.lower():
        return True
    return not reply.tool_calls and not scene_blocks(current)


def _tool_loop(st: _State) -> Generator[Effect, EffectResult, ModelFailure | None]:
    """Model calls until a reply without tool calls, or past MAX_TOOL_ROUNDS rounds of tool calls."""
    while True:
        reply = yield from _call(st, CHECKPOINT_TOOLS, None)
        if isinstance(reply, ModelFailure):
            return reply
        st.messages.append(ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls))
        if _offers_scene(reply, st.scene):
            st.scene = reply.text
        if not reply.tool_calls:
            return None
        if st.rounds >= MAX_TOOL_ROUNDS:
            st.notes.append(f"the model asked for a tool round past the limit of {MAX_TOOL_ROUNDS}")
            for call in reply.tool_calls:  # every call still gets its answer, so the history stays valid
                st.messages.append(_tool_message(call, "Not run: the rounds of tool calls are used up."))
            return None
        st.rounds += 1
        for call in reply.tool_calls:
            st.messages.append(_tool_message(call, (yield from _run_tool(st, call))))


def _tools_draft(st: _State) -> tuple[Checkpoint, list[Problem]]:
    ticks = read_ticks(render_checklist(st.candidates), st.checklist)
    draft, problems = _draft(st, ticks.ticked, _scene_of(st.scene))
    return draft, [*ticks.problems, *problems]


def _repair_text(problems: Sequence[Problem], how: str) -> str:
    return render(
        "repair_request",
        notice=render("harness_notice").strip(),
        problems=repair_request(problems),
        how=how,
    )


TOOLS_REPAIR_HOW: Final = (
    "Fix the files with edit_file, then answer with the whole scene block again (exactly one block)."
)


def _tools_turn(st: _State) -> Generator[Effect, EffectResult, TurnOutcome]:
    yield WriteWorkFiles(st.mind, st.checklist)
    st.messages.append(harness_message(st.inputs, request_text(st.inputs, st.mind, st.checklist)))
    failure = yield from _tool_loop(st)
    if failure is not None:
        return _model_failed(st, failure)
    draft, first = _tools_draft(st)
    if not first:
        return _accept(st, draft, (), repaired=False)
    st.messages.append(harness_message(st.inputs, _repair_text(first, TOOLS_REPAIR_HOW)))
    failure = yield from _tool_loop(st)
    if failure is not None:
        return _model_failed(st, failure, first)
    draft, problems = _tools_draft(st)
    return _accept(st, draft, first, repaired=True) if not problems else _fail(st, problems, first)


# ---- structured mode --------------------------------------------------------------------------------


def _ask(
    st: _State, question: structured.Question, preface: str
) -> Generator[Effect, EffectResult, ModelReply | ModelFailure]:
    text = f"{preface}\n\n{question.text}" if preface else question.text
    st.messages.append(harness_message(st.inputs, text))
    reply = yield from _call(st, st.inputs.cache_tools, question.schema)
    if isinstance(reply, ModelReply):
        st.messages.append(ChatMessage(role="assistant", content=reply.text))
    return reply


def _structured_round(
    st: _State, work: structured.Work, parts: Sequence[str], preface: str
) -> Generator[Effect, EffectResult, ModelFailure | None]:
    """Ask each part's question in order and apply its answer to `work` (edits, ticks, scene)."""
    for part in parts:
        question = structured.question(part, work)
        if question is None:
            continue
        reply = yield from _ask(st, question, preface)
        preface = ""
        if isinstance(reply, ModelFailure):
            return reply
        structured.apply_answer(part, work, reply.text)
        if part == "mission":
            structured.ensure_mission(work)
        yield from _mirror(st, work)
    return None


def _mirror(st: _State, work: structured.Work) -> Generator[Effect, EffectResult, None]:
    """F2: mirror the work files when an answer changed them."""
    checklist = structured.ticked_checklist(st.candidates, work.ticked)
    if (work.mind, checklist) != (st.mind, st.checklist):
        st.mind, st.checklist = work.mind, checklist
        yield WriteWorkFiles(st.mind, st.checklist)


def _structured_draft(st: _State, work: structured.Work) -> tuple[Checkpoint, list[Problem]]:
    draft, problems = _draft(st, work.ticked, work.scene)
    st.notes[:] = work.notes
    return draft, [*work.all_problems(), *problems]


def _structured_intro(inputs: TurnInputs) -> str:
    return render(
        "structured_request",
        notice=render("harness_notice").strip(),
        moving=_moving(inputs),
        question="",
    ).lstrip()


def _structured_turn(st: _State) -> Generator[Effect, EffectResult, TurnOutcome]:
    work = structured.Work.start(st.previous_mind, st.candidates, st.inputs.budgets, st.inputs.counter)
    intro = _structured_intro(st.inputs).strip()
    structured.remember_request(work, intro)
    yield WriteWorkFiles(st.mind, st.checklist)
    failure = yield from _structured_round(st, work, structured.PARTS, intro)
    if failure is not None:
        return _model_failed(st, failure)
    draft, first = _structured_draft(st, work)
    if not first:
        return _accept(st, draft, (), repaired=False)
    parts = structured.parts_to_reask(first, work)
    work.reset(parts, st.previous_mind)
    yield from _mirror(st, work)
    how = "Avibe asks again only the questions concerned; answer each with JSON only."
    failure = yield from _structured_round(st, work, parts, _repair_text(first, how).strip())
    if failure is not None:
        return _model_failed(st, failure, first)
    draft, problems = _structured_draft(st, work)
    return _accept(st, draft, first, repaired=True) if not problems else _fail(st, problems, first)


def checkpoint_turn(inputs: TurnInputs) -> Generator[Effect, EffectResult, TurnOutcome]:
    """One checkpoint turn (F3): effects out, results in; returns Accepted or Failed (V4, V5)."""
    st = _start(inputs)
    if inputs.mode == "tools":
        return (yield from _tools_turn(st))
    return (yield from _structured_turn(st))
