"""The checkpoint turn's working state and the steps both modes share: the harness's messages, the model
call, the draft (memo copied from the record, N4), and the outcome.

API (used by tools_mode.py and structured_mode.py):
    TurnState               mutable working state inside one turn; leaves it only through an outcome
    start(inputs) -> TurnState
    harness_message(inputs, text) -> ChatMessage       tagged from stored fields, kind "harness" (T4)
    user_seqs_since(inputs) -> frozenset[int]           the user's messages since the last checkpoint (M4)
    user_texts_since(inputs) -> dict[int, str]          ... with their texts (a new mission entry's words)
    texts_since(inputs) -> (user texts, other texts)     the record's messages since the last checkpoint
                                                        (moving out or still live; no tool output)
    moving(inputs) -> str                               which messages leave the context
    repair_text(problems, how) -> str                   the one repair request (V4)
    call(st, tools, schema) -> Generator[..., ModelReply | ModelFailure]
    draft(st, ticked, scene) -> (Checkpoint, problems)  every problem at once (V1-V3)
    accept(st, draft, first, repaired) -> Accepted      fail(st, problems, first) -> Failed
    model_failed(st, failure, first) -> Failed
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from avibe.checkpoint.effects import (
    Accepted,
    CallModel,
    Effect,
    EffectResult,
    Failed,
    ModelFailure,
    TurnInputs,
)
from avibe.checkpoint.facts import with_facts
from avibe.checkpoint.memo import (
    Candidate,
    Label,
    NewestKept,
    RulesKept,
    build_memo,
    clean_labels,
    dismissed,
    mark_asked,
    mark_later,
    memo_candidates,
    memo_tokens,
    mission_sources,
    newest_kept,
    render_checklist,
    rules_kept,
)
from avibe.checkpoint.mind import EMPTY_MIND, active_missions
from avibe.checkpoint.mission_guard import guard_new_missions
from avibe.checkpoint.model import Checkpoint, MemoItem, Problem
from avibe.checkpoint.validate import repair_request, validate
from avibe.prompts import render
from avibe.record.entries import Entry, Source
from avibe.record.messages import ChatMessage, ModelReply, ToolSpec
from avibe.record.sources import render_tag


@dataclass
class TurnState:
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
    rules: RulesKept = field(default_factory=lambda: RulesKept(()))  # besides the ticks (memo.rules_kept)
    mission_sources: tuple[Label, ...] = ()  # of rules.added: the mission's source (memo.mission_sources)
    newest: NewestKept = field(default_factory=lambda: NewestKept(()))  # memo.newest_kept, after the rules

    @property
    def previous_memo(self) -> tuple[MemoItem, ...]:
        return self.inputs.previous.memo if self.inputs.previous else ()

    @property
    def entries(self) -> dict[int, Entry]:
        return {
            e.seq: e
            for e in (*self.inputs.live_entries, *self.inputs.memo_entries, *self.inputs.moved_entries)
        }

    @property
    def live_user_seqs(self) -> frozenset[int]:
        """The user's messages staying in the conversation, by stored kind (N7)."""
        return frozenset(e.seq for e in self.inputs.live_entries if e.is_user)


def start(inputs: TurnInputs) -> TurnState:
    previous_mind = inputs.previous.mind if inputs.previous else EMPTY_MIND
    memo = inputs.previous.memo if inputs.previous else ()
    entries = {e.seq: e for e in (*inputs.memo_entries, *inputs.moved_entries)}
    # a line copied beside another while its message was still in the conversation (`newest_kept`) is
    # not offered as kept before: while it still is, `newest_kept` decides it again, and an untick must not
    # dismiss it (N6) before it moves out - a rule moving out with it would stay without its change (N3);
    # once it moves out, it is offered as any message moving out now (the newest are kept, N1)
    copies = {e.seq for e in (*inputs.live_entries, *inputs.moved_entries) if e.is_user}
    again = sent_again(inputs)
    candidates = memo_candidates(
        tuple(e for e in inputs.moved_entries if e.seq not in again),
        tuple(item for item in memo if item.seq not in copies | again),
        inputs.dismissed,
        counter=inputs.counter,
        per_message=inputs.budgets.memo_per_message,
        entries=entries,
    )
    return TurnState(
        inputs=inputs,
        previous_mind=previous_mind,
        candidates=candidates,
        checklist=render_checklist(candidates),
        mind=previous_mind,
        messages=list(inputs.live_messages),
    )


def sent_again(inputs: TurnInputs) -> frozenset[int]:
    """The user's messages whose words the user sent again, word for word, in a later message moving out
    now: the later copy stands for them (N1: the same words, once). People send a prompt again when the
    agent stalls - a real session sent three of its 25 twice, and the memo held one of them twice while it
    let a rule go for room. A copy still in the conversation stands for nothing yet: it moves out later."""
    memo = inputs.previous.memo if inputs.previous else ()
    known = [*inputs.memo_entries, *inputs.moved_entries]
    texts = {e.seq: e.text.strip() for e in known if e.is_user}
    texts |= {item.seq: item.text.strip() for item in memo if not item.cut and item.seq not in texts}
    last = {e.text.strip(): e.seq for e in sorted(inputs.moved_entries, key=lambda e: e.seq) if e.is_user}
    return frozenset(seq for seq, text in texts.items() if last.get(text, seq) > seq)


def user_seqs_since(inputs: TurnInputs) -> frozenset[int]:
    """M4: the user's messages since the last checkpoint - moving out now or still in the conversation -
    known by their record kind (N7): what a new mission entry may cite."""
    return frozenset(user_texts_since(inputs))


def user_texts_since(inputs: TurnInputs) -> dict[int, str]:
    """The texts of `user_seqs_since`'s messages, by number: a new mission entry's words are checked
    against the message it cites (M4)."""
    texts = {m.seq: m.content for m in inputs.live_messages if m.kind == "user" and m.seq is not None}
    return texts | {e.seq: e.text for e in inputs.moved_entries if e.is_user}


def texts_since(inputs: TurnInputs) -> tuple[list[str], list[str]]:
    """The texts of the record's messages since the last checkpoint - moving out now or still in the
    conversation, as `user_seqs_since` counts them: the user's (known by their record kind, N7), and the
    others' (Vibey's replies, watches, callbacks, other sessions). Tool output, the recollection and the
    harness's own messages are not among them."""
    found: dict[int, tuple[str, str]] = {e.seq: (e.kind, e.text) for e in inputs.moved_entries}
    for m in inputs.live_messages:
        if m.seq is not None and m.role in ("user", "assistant"):  # no kind: not the user's (N7)
            found.setdefault(m.seq, (m.kind or "assistant", m.content))
    user = [text for kind, text in found.values() if kind == "user"]
    other = [text for kind, text in found.values() if kind not in ("user", "harness")]
    return user, other


def harness_message(inputs: TurnInputs, text: str) -> ChatMessage:
    """A message from Avibe in the turn: tagged from stored fields, kind "harness", never the user (T4)."""
    tag = render_tag(Source(kind="harness", name="checkpoint"), inputs.at)
    return ChatMessage(role="user", content=f"{tag}\n{text}", kind="harness")


def moving(inputs: TurnInputs) -> str:
    """The request's sentence on which messages leave the context."""
    if inputs.upto_seq is None:
        return render("moving_oldest").strip()
    return render("moving_upto", upto=inputs.upto_seq).strip()


def repair_text(problems: Sequence[Problem], how: str) -> str:
    return render(
        "repair_request",
        notice=render("harness_notice").strip(),
        problems=repair_request(problems),
        how=how,
    )


def call(
    st: TurnState, tools: tuple[ToolSpec, ...], schema: Mapping[str, Any] | None
) -> Generator[Effect, EffectResult, ModelReply | ModelFailure]:
    st.calls += 1
    result = yield CallModel(tuple(st.messages), tools, schema, st.inputs.max_tokens)
    if not isinstance(result, ModelReply | ModelFailure):
        raise TypeError(f"CallModel needs a ModelReply or ModelFailure back, got {type(result).__name__}")
    return result


def _dedup(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    return tuple(dict.fromkeys(problems))


def draft(st: TurnState, ticked: frozenset[Label], scene: str) -> tuple[Checkpoint, list[Problem]]:
    """Memo copied from the record (N4) - the model's ticks plus the mission's source in the user's words
    (M4, N1) and the rules it left unticked (N2) - the
    harness's facts added to the scene (S3, S6), then every problem at once (V1-V3)."""
    inputs = st.inputs
    per_message = inputs.budgets.memo_per_message
    st.mind, dropped = guard_new_missions(st.previous_mind, st.mind, user_texts_since(inputs))  # M4
    st.notes += [note for note in dropped if note not in st.notes]
    sources = mission_sources(
        active_missions(st.mind), st.candidates, st.entries, inputs.counter, per_message
    )
    st.rules = rules_kept(
        st.candidates, ticked, st.entries, inputs.counter, inputs.budgets, st.previous_memo, first=sources
    )
    st.mission_sources = tuple(label for label in sources if label in st.rules.added)
    ticked = (clean_labels(ticked) - frozenset(st.rules.let_go)) | frozenset(st.rules.added)
    # the user's newest words, and what changed a kept rule, kept too (N3, P3, no word list)
    st.newest = newest_kept(
        st.candidates,
        ticked,
        st.entries,
        inputs.counter,
        inputs.budgets,
        st.previous_memo,
        first=sources,
        live=st.live_user_seqs,
    )
    memo = build_memo(st.newest.labels, st.entries, inputs.counter, inputs.budgets, st.previous_memo)
    # a kept rule's later change still in the conversation: marked, not copied (N3, memo/later.py)
    items = mark_later(memo.items, inputs.live_entries)
    # a kept short reply with the question it answered, in the room the user's words left (N3, N5)
    room = inputs.budgets.memo_total - memo_tokens(items, inputs.counter)
    around = {e.seq: e for e in inputs.before_entries} | st.entries
    items = mark_asked(items, around, st.previous_memo, inputs.counter, room)
    scene = with_facts(scene, inputs.facts, inputs.budgets.window)  # S3, S6: what the harness knows
    proposed = Checkpoint(mind=st.mind, memo=items, scene=scene)
    covered = all(item.seq in st.entries for item in proposed.memo)
    record = st.entries if covered else None
    found = validate(
        inputs.previous, proposed, inputs.budgets, inputs.counter, record=record, facts=inputs.facts
    )
    return proposed, list(_dedup([*memo.problems, *found]))


def accept(st: TurnState, proposed: Checkpoint, first: Sequence[Problem], repaired: bool) -> Accepted:
    ticked = frozenset(item.seq for item in proposed.memo)
    return Accepted(
        checkpoint=proposed,
        dismissed_seqs=dismissed(st.candidates, ticked),
        calls=st.calls,
        first_pass_problems=tuple(first),
        repaired=repaired,
        tool_rounds=st.rounds,
        notes=(*st.notes, *_rules_note(st)),
    )


def _rules_note(st: TurnState) -> tuple[str, ...]:
    def numbers(labels: tuple[Label, ...]) -> str:
        return ", ".join(f"#{label}" for label in labels)

    notes = []
    if st.mission_sources:
        notes.append(
            f"memo: kept {numbers(st.mission_sources)} besides the model's ticks (the mission's source, M4)"
        )
    if rules := tuple(label for label in st.rules.added if label not in st.mission_sources):
        notes.append(f"memo: kept {numbers(rules)} besides the model's ticks (worded as a rule, N2)")
    if st.rules.let_go:
        notes.append(
            f"memo: let go {numbers(st.rules.let_go)}, ticked, to fit the budget (plain lines first)"
        )
    if st.newest.beside:
        notes.append(
            f"memo: kept {numbers(st.newest.beside)} beside the lines they change (the user's later words,"
            " still in the conversation)"
        )
    if st.newest.added:
        notes.append(
            f"memo: kept {numbers(st.newest.added)} besides the model's ticks (the user's newest words)"
        )
    if st.newest.let_go:
        notes.append(f"memo: let go {numbers(st.newest.let_go)} for the user's newer words")
    return tuple(notes)


def fail(st: TurnState, problems: Sequence[Problem], first: Sequence[Problem] = ()) -> Failed:
    return Failed(_dedup(problems), st.calls, st.rounds, tuple(first), tuple(st.notes))


def model_failed(st: TurnState, failure: ModelFailure, first: Sequence[Problem] = ()) -> Failed:
    return fail(st, [Problem("model.error", f"The model call failed: {failure.text}")], first)
