"""The checkpoint driver: performs the checkpoint turn's effects against the ports and applies every
fallback (F2, F3, U1, U2, V4-V9).

The turn itself (`avibe.checkpoint.turn`) is pure; this module only does what it asks: write the two work
files into the session's temporary directory, call the same model over the current conversation (so the
cached prompt prefix is reused), read files through the read tool. Failures are logged with their reason
(U2) and never shown to the user or raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.facts import HarnessFacts
from avibe.checkpoint.mind import EMPTY_MIND
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.plan import MovePlan, model_free_move_out, partial_plan, plan_move_out
from avibe.checkpoint.room import CHECKPOINT_REPLY_TOKENS, turn_overhead
from avibe.checkpoint.scene import harness_scene
from avibe.checkpoint.turn import (
    Accepted,
    CallModel,
    Effect,
    EffectResult,
    Failed,
    Mode,
    ModelFailure,
    ReadFailed,
    ReadFile,
    TurnInputs,
    TurnOutcome,
    WriteWorkFiles,
    checkpoint_turn,
)
from avibe.errors import ModelError
from avibe.ports import (
    Clock,
    CompletionRequest,
    ModelClient,
    RecordStore,
    StoredCheckpoint,
    TokenCounter,
    ToolResult,
)
from avibe.record.checkpoint import Carry, Provenance
from avibe.record.entries import Entry, EntryQuery
from avibe.record.messages import ChatMessage, ToolCall

log = logging.getLogger("avibe.checkpoint")

MIND_FILE = "mind.md"
MEMO_FILE = "memo.md"

# The record entries with these seqs, in seq order (the moved-out messages, the memo's entries). Vibey's
# reads its record store; the eval's reads the replay's entries: the driver needs no store of its own.
EntryLookup = Callable[[Sequence[int]], tuple[Entry, ...]]


def store_lookup(store: RecordStore, session_id: str) -> EntryLookup:
    def lookup(seqs: Sequence[int]) -> tuple[Entry, ...]:
        if not seqs:
            return ()
        found = store.query(EntryQuery(session_id, seq_from=min(seqs), seq_to=max(seqs)))
        wanted = set(seqs)
        return tuple(e for e in found if e.seq in wanted)

    return lookup


def entries_lookup(entries: Sequence[Entry]) -> EntryLookup:
    by_seq = {entry.seq: entry for entry in entries}

    def lookup(seqs: Sequence[int]) -> tuple[Entry, ...]:
        return tuple(by_seq[seq] for seq in sorted(set(seqs)) if seq in by_seq)

    return lookup


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    """What one checkpoint attempt did. `checkpoint` (not yet saved: the caller adds tokens_after and
    saves it) and `kept`, the new conversation, are set on success; `checkpoint` is None on failure."""

    checkpoint: StoredCheckpoint | None
    kept: tuple[ChatMessage, ...]
    dismissed: frozenset[int] = frozenset()
    freed_tokens: int = 0
    reason: str = ""
    fallback: str | None = None  # None, "partial", "model-free"
    attempted: bool = True  # False when there was nothing to move out (not a failure, V8)
    problems: tuple[str, ...] = ()  # a failed attempt's problems, "code: message" (what the inspector shows)


@dataclass
class TurnStats:
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    notes: list[str] = field(default_factory=list)


# Both embedded tiers ask their structured questions in three calls (the memo, the mind, the scene): they
# kept the same rules and missions as with one question a call and answered the probes as well (ties by
# the paired intervals), for ~40% fewer tokens and fewer seconds a compaction - the 0.5B on the seven real
# sessions, the 1.5B on the five generated types, seeds 1-3 (docs/eval.md). Other local models are not
# measured: one question a call, the smallest step, is theirs.
MODE_BY_MODEL: Final[dict[str, Mode]] = {"embedded": "three", "embedded-1.5b": "three"}


# The reminder after a user's message (context/assemble.py `with_reminder`), measured per model on the five
# generated types, seeds 1-3, on the same checkpoints (docs/eval.md): the 1.5B declined the next action a
# kept rule forbids 5 of 18 times without it and 10 of 18 with it, exact answers the same (17 of 21); 13
# of 18 once it came only where the message could go against a rule (the handoff's context: 4), 14 of 18
# worded to ask for an answer in the model's own words, and 14 of 18 at K = 4 (the handoff's: 7);
# the 0.5B declined no more (1 with, 2 without) and answered fewer exact questions (13 against 16 of 21):
# it copied the note's last line or went off to a tool call. So every model gets it but the 0.5B.
NO_REMINDER_MODELS: Final[frozenset[str]] = frozenset({"embedded"})


def reminds(model_name: str) -> bool:
    """Whether Vibey's view restates the memo's rules after a user's message, for this model."""
    return model_name not in NO_REMINDER_MODELS


def mode_for(model_name: str, local: bool) -> Mode:
    """How the checkpoint turn asks (one decision for `vibe run` and the eval): small JSON questions under
    a grammar for local models, which write poor free-form checkpoints (MODE_BY_MODEL: how many calls);
    edit and tick tools otherwise."""
    if not local:
        return "tools"
    return MODE_BY_MODEL.get(model_name, "structured")


def checkpoint_from_stored(stored: StoredCheckpoint | None) -> Checkpoint | None:
    if stored is None:
        return None
    return Checkpoint(mind=stored.mind, memo=stored.memo, scene=stored.scene)


@dataclass
class CheckpointDriver:
    lookup: EntryLookup
    model: ModelClient
    counter: TokenCounter
    session_id: str
    session_dir: Path
    clock: Clock
    mode: Mode
    run_tool: Callable[[ToolCall], ToolResult] | None = None  # reads go through the read tool's checks

    # ---- effects ----------------------------------------------------------------------------------

    def _perform(self, effect: Effect, stats: TurnStats) -> EffectResult:
        if isinstance(effect, WriteWorkFiles):
            self.session_dir.mkdir(parents=True, exist_ok=True)
            (self.session_dir / MIND_FILE).write_text(effect.mind, encoding="utf-8")
            (self.session_dir / MEMO_FILE).write_text(effect.checklist, encoding="utf-8")
            return None
        if isinstance(effect, CallModel):
            return self._call(effect, stats)
        if isinstance(effect, ReadFile):
            return self._read(effect.path)
        raise TypeError(f"unknown checkpoint effect {effect!r}")

    def _call(self, effect: CallModel, stats: TurnStats) -> EffectResult:
        stats.calls += 1
        try:
            reply = self.model.complete(
                CompletionRequest(
                    effect.messages,
                    effect.tools,
                    json_schema=effect.json_schema,
                    max_tokens=effect.max_tokens,
                )
            )
        except ModelError as exc:
            return ModelFailure(f"{type(exc).__name__}: {exc}")
        stats.prompt_tokens += reply.usage.prompt_tokens
        stats.cached_tokens += reply.usage.cached_tokens
        return reply

    def _read(self, path: str) -> str | ReadFailed:
        if self.run_tool is None:
            return ReadFailed("reading files is not available in this session")
        result = self.run_tool(ToolCall(id="checkpoint-read", name="read_file", arguments={"path": path}))
        return ReadFailed(result.output) if result.is_error else result.output

    def _drive(self, inputs: TurnInputs, stats: TurnStats) -> TurnOutcome:
        gen = checkpoint_turn(inputs)
        try:
            effect = next(gen)
            while True:
                effect = gen.send(self._perform(effect, stats))
        except StopIteration as stop:
            outcome: TurnOutcome = stop.value
            return outcome

    # ---- one checkpoint -----------------------------------------------------------------------------

    def _entries(self, seqs: Sequence[int]) -> tuple[Entry, ...]:
        return self.lookup(seqs)

    def _inputs(
        self,
        view: Sequence[ChatMessage],
        plan: MovePlan,
        previous: Checkpoint | None,
        budgets: Budgets,
        dismissed: frozenset[int],
        tools: Sequence[Any],
        facts: HarnessFacts,
    ) -> TurnInputs:
        memo_seqs = [item.seq for item in previous.memo] if previous else []
        moved = self._entries(plan.moved_seqs)
        memo_entries = self._entries(memo_seqs)
        live = self._entries([m.seq for m in plan.kept if m.kind == "user" and m.seq is not None])
        # the agent's message before each of the user's: the question a short reply answers (N3)
        users = {e.seq for e in (*moved, *memo_entries, *live) if e.is_user}
        before = sorted({seq - 1 for seq in users if seq > 1} - {e.seq for e in moved})
        return TurnInputs(
            mode=self.mode,
            live_messages=tuple(view),
            previous=previous,
            moved_entries=moved,
            budgets=budgets,
            counter=self.counter,
            at=self.clock.now(),
            mind_path=str(self.session_dir / MIND_FILE),
            checklist_path=str(self.session_dir / MEMO_FILE),
            memo_entries=memo_entries,
            live_entries=live,
            before_entries=self._entries(before),
            dismissed=dismissed,
            upto_seq=plan.upto_seq,
            max_tokens=min(CHECKPOINT_REPLY_TOKENS, turn_overhead(budgets.window)),
            cache_tools=tuple(tools),
            facts=facts,
        )

    def run(
        self,
        *,
        view: Sequence[ChatMessage],
        conversation: Sequence[ChatMessage],
        base_view: Sequence[ChatMessage],
        previous: StoredCheckpoint | None,
        budgets: Budgets,
        dismissed: frozenset[int],
        turn_start: int | None,
        tools: Sequence[Any],
        carry: Carry,
        provenance: Provenance,
        partial: bool = False,
        facts: HarnessFacts | None = None,
    ) -> CheckpointResult:
        """Try one checkpoint (V6's partial tries when the room policy says the turn would not fit).
        Never raises for a model's misbehaviour; returns a result whose `checkpoint` is None on failure
        (V5: nothing changed).

        view:       the full request as it would go out now (system + recollection + conversation).
        base_view:  the system prompt and recollection alone (for V6's partial turns).
        facts:      what the harness knows (background jobs, files, the last failing call), added to the
                    scene (S3, S6); None: nothing known.
        """
        started = time.monotonic()
        prev = checkpoint_from_stored(previous)
        plan = plan_move_out(conversation, self.counter, budgets.recent_messages, turn_start)
        if plan.is_empty:
            return CheckpointResult(None, tuple(conversation), reason=plan.reason, attempted=False)
        attempts: list[tuple[MovePlan, Sequence[ChatMessage], str | None]] = []
        if not partial:
            attempts.append((plan, view, None))
        else:
            room = budgets.window - self.counter.count_messages(base_view) - turn_overhead(budgets.window)
            for attempt in (1, 2):  # V6: the older part only, at most two tries
                part = partial_plan(conversation, self.counter, max(room, 0), attempt, turn_start)
                if part is not None:
                    attempts.append((part, (*base_view, *part.moved), "partial"))
            if not attempts:  # U2: a partial checkpoint that could not even be planned is logged too
                log.warning(
                    "session %s: no partial checkpoint could be planned (V6): a turn has room for %d tokens "
                    "and no older part fits it",
                    self.session_id,
                    max(room, 0),
                )
        stats = TurnStats()
        last_reason = "the conversation is too large even for a partial checkpoint turn (V6)"
        problems: tuple[str, ...] = ()
        for chosen, turn_view, fallback in attempts:
            inputs = self._inputs(turn_view, chosen, prev, budgets, dismissed, tools, facts or HarnessFacts())
            outcome = self._drive(inputs, stats)
            if isinstance(outcome, Accepted):
                took = time.monotonic() - started
                return self._accepted(chosen, outcome, previous, stats, carry, provenance, fallback, took)
            last_reason = self._log_failure(outcome, chosen)
            problems = tuple(f"{p.code}: {p.message}" for p in outcome.problems)
        return CheckpointResult(None, tuple(conversation), reason=last_reason, problems=problems)

    def _log_failure(self, outcome: Failed, plan: MovePlan) -> str:
        problems = "; ".join(f"{p.code}: {p.message}" for p in outcome.problems) or "no reason given"
        reason = f"checkpoint failed after {outcome.calls} calls ({plan.reason}): {problems}"
        log.warning("session %s: %s", self.session_id, reason)  # U2: to the log, not the screen
        return reason

    def _accepted(
        self,
        plan: MovePlan,
        outcome: Accepted,
        previous: StoredCheckpoint | None,
        stats: TurnStats,
        carry: Carry,
        provenance: Provenance,
        fallback: str | None,
        took: float,
    ) -> CheckpointResult:
        cached_share = stats.cached_tokens / stats.prompt_tokens if stats.prompt_tokens else 0.0
        for note in outcome.notes:  # what the harness changed around the answers (M4's dropped entries ...)
            log.info("session %s: checkpoint note: %s", self.session_id, note)
        made = replace(
            provenance,
            calls=outcome.calls,
            tool_rounds=outcome.tool_rounds,
            problems=tuple(f"{p.code}: {p.message}" for p in outcome.first_pass_problems),
            repair_used=outcome.repaired,
            fallback=fallback,
            plan=plan.reason,
            freed_tokens=plan.freed_tokens,
            seconds=round(took, 3),
            mode=self.mode,
            prompt_tokens=stats.prompt_tokens,
            cached_tokens=stats.cached_tokens,
            cached_share=round(cached_share, 4),
            notes=tuple(outcome.notes),
        )
        unsaved = self._stored(outcome.checkpoint, plan, previous, carry, made)
        return CheckpointResult(
            unsaved, plan.kept, outcome.dismissed_seqs, plan.freed_tokens, plan.reason, fallback
        )

    def _stored(
        self,
        checkpoint: Checkpoint,
        plan: MovePlan,
        previous: StoredCheckpoint | None,
        carry: Carry,
        provenance: Provenance,
    ) -> StoredCheckpoint:
        upto = max(plan.upto_seq or 0, previous.upto_seq if previous else 0)
        return StoredCheckpoint(
            session=self.session_id,
            number=0,  # the store assigns the next number
            at=self.clock.now(),
            mind=checkpoint.mind,
            memo=checkpoint.memo,
            scene=checkpoint.scene,
            upto_seq=upto,
            carry=carry,
            provenance=provenance,
        )

    # ---- V7: no model -------------------------------------------------------------------------------

    def move_out_without_model(
        self,
        conversation: Sequence[ChatMessage],
        previous: StoredCheckpoint | None,
        budgets: Budgets,
        turn_start: int | None,
        carry: Carry,
        provenance: Provenance,
    ) -> CheckpointResult:
        """V7: the oldest half moves out without a model call; the previous mind, scene and skills stay
        and the memo holds every moved-out user message (cut, with a pointer to the record)."""
        prev = checkpoint_from_stored(previous) or empty_checkpoint()
        probe = model_free_move_out(conversation, self.counter, prev, (), budgets, turn_start)
        if probe.plan.is_empty:
            return CheckpointResult(None, tuple(conversation), reason="nothing left to move out")
        entries = self._entries(probe.plan.moved_seqs)
        done = model_free_move_out(conversation, self.counter, prev, entries, budgets, turn_start)
        log.warning("session %s: %s", self.session_id, done.reason)
        made = replace(
            provenance, fallback="model-free", plan=done.reason, calls=0, freed_tokens=done.plan.freed_tokens
        )
        unsaved = self._stored(done.checkpoint, done.plan, previous, carry, made)
        return CheckpointResult(
            unsaved, done.plan.kept, frozenset(), done.plan.freed_tokens, done.reason, "model-free"
        )


def empty_checkpoint() -> Checkpoint:
    """What V7 keeps when no checkpoint was ever made: the empty mind template and a harness-written scene
    that says so (the model wrote nothing, so nothing model-written is claimed)."""
    return Checkpoint(mind=EMPTY_MIND, memo=(), scene=harness_scene())
