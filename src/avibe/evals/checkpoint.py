"""Avibe's checkpoint as an evaluation strategy: Vibey's own checkpoint driver (`avibe.agent.driver`), run
on the replay's record and context, with its fallbacks (V5-V8).

Each compaction copies the replay's record into a throwaway in-memory record (the driver reads moved
messages and memo entries from a RecordStore, as in a real session), runs one checkpoint (with V6's partial
tries), and on failure either leaves the context as it is while it still fits the window (V5: a later
request tries again) or moves the oldest part out without the model (V7); after two failures no more
checkpoint turns are tried (V8). The checkpoint itself is carried to the next compaction as JSON.

mode: "structured" (small JSON questions under a grammar; Vibey's choice for local models) or "tools"
(edit and tick with tool calls; its choice for hosted models) - `mode_for(model_name)` picks like Vibey.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from avibe.errors import ModelError
from avibe.evals.strategies import CheckpointDriver
from avibe.evals.strategy import Compacted, CompactionFailed, CompactState
from avibe.ports import ModelClient, StoredCheckpoint, TokenCounter
from avibe.record.entries import Entry, NewEntry
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolSpec

Mode = Literal["tools", "structured"]
RECOLLECTION_KIND: Final = "checkpoint"  # ChatMessage.kind of the recollection in the replay's context
MAX_FAILURES: Final = 2  # V8


def mode_for(model_name: str) -> Mode:
    """Vibey's choice: structured questions for local models, tool calls for hosted ones."""
    from avibe.providers import is_local

    return "structured" if is_local(model_name) else "tools"


class _FixedClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


class _Metered:
    """Counts what the checkpoint's calls cost, the same way the baselines' summaries are counted."""

    def __init__(self, model: ModelClient, counter: TokenCounter) -> None:
        self.model, self.counter = model, counter
        self.tokens = self.calls = 0

    @property
    def facts(self) -> ModelFacts:
        return self.model.facts

    def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ModelReply:
        self.calls += 1
        try:
            reply = self.model.complete(
                messages, tools, json_schema=json_schema, max_tokens=max_tokens, temperature=temperature
            )
        except ModelError:
            self.tokens += self.counter.count_messages(messages)  # a failed call still cost its prompt
            raise
        reported = reply.usage.prompt_tokens + reply.usage.completion_tokens
        self.tokens += reported or self.counter.count_messages(messages) + self.counter.count(reply.text)
        return reply


@dataclass(frozen=True, slots=True)
class _Carry:
    """What one compaction hands to the next: the last checkpoint, unticked seqs (N6), failures (V8)."""

    checkpoint: dict[str, Any] | None = None
    dismissed: tuple[int, ...] = ()
    failures: int = 0
    number: int = 0

    @classmethod
    def parse(cls, text: str) -> _Carry:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(data["checkpoint"], tuple(data["dismissed"]), data["failures"], data["number"])

    def dump(self) -> str:
        return json.dumps({"checkpoint": self.checkpoint, "dismissed": list(self.dismissed),
                           "failures": self.failures, "number": self.number})  # fmt: skip

    def stored(self, session: str) -> StoredCheckpoint | None:
        c = self.checkpoint
        if c is None:
            return None
        at = datetime.fromisoformat(c["at"])
        return StoredCheckpoint(session, self.number, at, c["mind"], c["memo"], c["scene"], c["upto_seq"], {})


def _as_carried(stored: StoredCheckpoint) -> dict[str, Any]:
    return {"mind": stored.mind, "memo": stored.memo, "scene": stored.scene, "upto_seq": stored.upto_seq,
            "at": stored.at.isoformat()}  # fmt: skip


def _recollection_message(stored: StoredCheckpoint, number: int) -> ChatMessage:
    from avibe.agent.driver import checkpoint_from_stored
    from avibe.context.assemble import recollection

    checkpoint = checkpoint_from_stored(stored)
    assert checkpoint is not None  # a stored checkpoint always converts
    return ChatMessage("system", recollection(checkpoint, number=number), kind=RECOLLECTION_KIND)


_slots_lock = threading.Lock()
_slots_busy: set[int] = set()


@contextmanager
def _work_dir() -> Iterator[Path]:
    """The session folder for the two work files (F2). Its path appears in the checkpoint request, so it is
    a fixed slot per concurrent worker, not a random name: the same run asks the same prompt."""
    with _slots_lock:
        slot = min(set(range(len(_slots_busy) + 1)) - _slots_busy)
        _slots_busy.add(slot)
    folder = Path(tempfile.gettempdir()) / f"avibe-eval-{os.getuid()}" / f"slot-{slot}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with _slots_lock:
            _slots_busy.discard(slot)


def make_checkpoint_driver(mode: Mode | None = None) -> CheckpointDriver:
    """The checkpoint driver for `register_checkpoint_driver`; mode None picks by the model's name."""

    def drive(state: CompactState, model: ModelClient, counter: TokenCounter, window: int) -> Compacted:
        return _compact(state, model, counter, window, mode or mode_for(model.facts.name))

    return drive


def _compact(
    state: CompactState, model: ModelClient, counter: TokenCounter, window: int, mode: Mode
) -> Compacted:
    from avibe.agent.driver import CheckpointDriver as AgentDriver
    from avibe.checkpoint.budgets import budgets_for
    from avibe.store import open_store

    carry = _Carry.parse(state.carry)
    budgets = budgets_for(window, int(window * state.threshold))
    system = state.messages[0]
    conversation = [m for m in state.messages[1:] if m.kind != RECOLLECTION_KIND]
    base_view = [m for m in state.messages if m.role == "system"]
    metered = _Metered(model, counter)
    with open_store("sqlite://") as store, _work_dir() as tmp:
        session = store.create_session(f"eval {state.session}").id
        for entry in state.record:
            store.append(NewEntry(session, entry.source, entry.text, entry.at, entry.turn_id))
        driver = AgentDriver(
            store, metered, counter, session, Path(tmp), _FixedClock(state.record[-1].at), mode
        )
        previous = carry.stored(session)
        result = None
        if carry.failures < MAX_FAILURES:
            result = driver.run(view=state.messages, conversation=conversation, base_view=base_view,
                                previous=previous, budgets=budgets, dismissed=frozenset(carry.dismissed),
                                turn_start=None, tools=(), meta={})  # fmt: skip
        failures = (
            carry.failures if result is not None and result.checkpoint is not None else carry.failures + 1
        )
        if result is None or result.checkpoint is None:
            reason = result.reason if result is not None else "V8: two failed checkpoints; no more turns"
            if counter.count_messages(state.messages) <= window and failures <= MAX_FAILURES:
                meta = {"first_pass_valid": False, "repaired": False, "fallback": "failed"}
                failed = _Carry(carry.checkpoint, carry.dismissed, failures, carry.number).dump()
                return Compacted(state.messages, metered.tokens, metered.calls, failed, (reason,), meta)
            result = driver.move_out_without_model(conversation, previous, budgets, None, {})
            if result.checkpoint is None:
                raise CompactionFailed(
                    f"the checkpoint could neither run nor move anything out: {result.reason}"
                )
    return _accepted(state, result, carry, failures, system, metered)


def memo_audit(memo: Sequence[Mapping[str, Any]], record: Sequence[Entry]) -> dict[str, int]:
    """The memo's guarantees checked against the record, not taken on trust (N4, N7): how many entries,
    how many hold their record entry's text byte for byte (or a prefix + cut note, N5), and how many
    come from anything but a user message."""
    from avibe.checkpoint.memo import memo_text_matches
    from avibe.checkpoint.model import MemoItem

    by_seq = {entry.seq: entry for entry in record}
    verbatim = non_user = 0
    for data in memo:
        item = MemoItem.from_dict(data)
        entry = by_seq.get(item.seq)
        verbatim += entry is not None and memo_text_matches(item, entry.text)
        non_user += entry is None or entry.source.kind != "user"
    return {"memo_entries": len(memo), "memo_verbatim": verbatim, "memo_non_user": non_user}


def _accepted(
    state: CompactState, result: Any, carry: _Carry, failures: int, system: ChatMessage, metered: _Metered
) -> Compacted:
    stored: StoredCheckpoint = result.checkpoint
    number = carry.number + 1
    meta_in: dict[str, Any] = stored.meta
    meta = {
        # V1-V3 on the first answer: the model-free move-out (V7) had no answer to validate
        "first_pass_valid": result.fallback != "model-free" and not meta_in.get("problems"),
        "repaired": bool(meta_in.get("repair_used")),
        "fallback": result.fallback,
        **memo_audit(stored.memo, state.record),
    }
    dismissed = tuple(sorted(set(carry.dismissed) | set(result.dismissed)))
    new_carry = _Carry(_as_carried(stored), dismissed, failures, number).dump()
    messages = (system, _recollection_message(stored, number), *result.kept)
    notes = (str(meta_in.get("plan", "")),) if meta_in.get("plan") else ()
    return Compacted(messages, metered.tokens, metered.calls, new_carry, notes, meta)


eval_driver: Final[CheckpointDriver] = make_checkpoint_driver()  # found by avibe.evals.strategies
