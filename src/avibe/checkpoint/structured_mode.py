"""The checkpoint turn in structured mode: small JSON questions under a grammar, answers applied by the
harness (`checkpoint/structured/`); one repair round re-asks only the questions concerned (V4). Mode
"structured" asks one question a call; "three" the memo, the mind and the scene, a call each; "grouped"
the mind's and the scene's together.

API (used by turn.py):
    structured_turn(st) -> Generator[Effect, EffectResult, TurnOutcome]
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from avibe.checkpoint import structured
from avibe.checkpoint.effects import (
    Effect,
    EffectResult,
    ModelFailure,
    TurnInputs,
    TurnOutcome,
    WriteWorkFiles,
)
from avibe.checkpoint.model import Checkpoint, Problem
from avibe.checkpoint.turn_state import (
    TurnState,
    accept,
    call,
    draft,
    fail,
    harness_message,
    model_failed,
    moving,
    repair_text,
    texts_since,
    user_texts_since,
)
from avibe.prompts import render
from avibe.record.messages import ChatMessage, ModelReply


def _ask(
    st: TurnState, question: structured.Question, preface: str
) -> Generator[Effect, EffectResult, ModelReply | ModelFailure]:
    text = f"{preface}\n\n{question.text}" if preface else question.text
    st.messages.append(harness_message(st.inputs, text))
    reply = yield from call(st, st.inputs.cache_tools, question.schema)
    if isinstance(reply, ModelReply):
        st.messages.append(ChatMessage(role="assistant", content=reply.text))
    return reply


def _round(
    st: TurnState, work: structured.Work, parts: Sequence[str], preface: str
) -> Generator[Effect, EffectResult, ModelFailure | None]:
    """Ask the parts' questions in order - one a call, or grouped as the mode says (`structured.groups`)
    - and apply each answer to `work` (edits, ticks, scene)."""
    for group in structured.groups(st.inputs.mode, parts):
        asked = structured.ask(group, work)
        if asked is None:
            continue
        reply = yield from _ask(st, asked.question, preface)
        preface = ""
        if isinstance(reply, ModelFailure):
            return reply
        structured.apply_group(asked, work, reply.text)
        yield from _mirror(st, work)
    if any(part in structured.MIND_PARTS for part in parts):
        structured.fit_caps(work, st.previous_mind)  # M4, M6: a cap never makes a checkpoint impossible
        yield from _mirror(st, work)
    return None


def _mirror(st: TurnState, work: structured.Work) -> Generator[Effect, EffectResult, None]:
    """F2: mirror the work files when an answer changed them."""
    checklist = structured.ticked_checklist(st.candidates, work.ticked)
    if (work.mind, checklist) != (st.mind, st.checklist):
        st.mind, st.checklist = work.mind, checklist
        yield WriteWorkFiles(st.mind, st.checklist)


def _draft(st: TurnState, work: structured.Work) -> tuple[Checkpoint, list[Problem]]:
    proposed, problems = draft(st, work.ticked, work.scene)
    # the answers' notes first, then the draft's own (M4's guard), which a plain copy used to drop
    st.notes[:] = [*work.notes, *(note for note in st.notes if note not in work.notes)]
    return proposed, [*work.all_problems(), *problems]


def _intro(inputs: TurnInputs) -> str:
    return render(
        "structured_request",
        notice=render("harness_notice").strip(),
        moving=moving(inputs),
        question="",
    ).lstrip()


def structured_turn(st: TurnState) -> Generator[Effect, EffectResult, TurnOutcome]:
    """Every question once; when the draft has problems, the questions concerned once more."""
    work = structured.Work.start(st.previous_mind, st.candidates, st.inputs.budgets, st.inputs.counter)
    work.said = user_texts_since(st.inputs)
    work.since = frozenset(work.said)  # M4: the messages a new mission entry may cite
    work.notes_due = structured.notes_due(st.inputs.previous is None, *texts_since(st.inputs))
    intro = _intro(st.inputs).strip()
    structured.remember_request(work, intro)
    structured.remember_tool_output(work, st.inputs.live_messages)
    yield WriteWorkFiles(st.mind, st.checklist)
    failure = yield from _round(st, work, structured.PARTS, intro)
    if failure is not None:
        return model_failed(st, failure)
    proposed, first = _draft(st, work)
    if not first:
        return accept(st, proposed, (), repaired=False)
    parts = structured.parts_to_reask(first, work)
    work.reset(parts, st.previous_mind)
    yield from _mirror(st, work)
    how = render("repair_how_structured").strip()
    failure = yield from _round(st, work, parts, repair_text(first, how).strip())
    if failure is not None:
        return model_failed(st, failure, first)
    proposed, problems = _draft(st, work)
    return accept(st, proposed, first, repaired=True) if not problems else fail(st, problems, first)
