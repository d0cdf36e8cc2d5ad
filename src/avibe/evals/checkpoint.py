"""Avibe's checkpoint as an evaluation strategy: the code Vibey runs, on the replay's context.

Each compaction runs Vibey's room loop (`avibe.agent.room.make_room`) with Vibey's pure room policy
(`avibe.checkpoint.room`) and Vibey's checkpoint driver (`avibe.agent.driver`), over the replay's messages
and record entries (the driver takes entries, not a store): a checkpoint when the policy says so, V5 (a
failed checkpoint changes nothing while the request still fits), V7 (the oldest part moved out without
the model) and V8 (after two strikes, no more checkpoint turns) exactly as in a session. The checkpoint
itself and V8's strikes are carried to the next compaction as JSON.

mode: "structured" (small JSON questions under a grammar; Vibey's choice for local models) or "tools"
(edit and tick with tool calls; its choice for hosted models) - None picks by the model's name, like Vibey.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from avibe.agent.driver import CheckpointDriver, CheckpointResult, checkpoint_from_stored, entries_lookup
from avibe.agent.driver import mode_for as driver_mode_for
from avibe.agent.room import make_room
from avibe.checkpoint.budgets import Budgets, budgets_for
from avibe.checkpoint.facts import FailedCall, HarnessFacts, WaitingJob, failure_after
from avibe.checkpoint.plan import CheckpointRunState
from avibe.checkpoint.room import Checkpoint, MoveOut, PartialCheckpoint, RoomLimits, limits_for
from avibe.checkpoint.structured import SCENE_COMPLETED
from avibe.checkpoint.trigger import TriggerDecision
from avibe.checkpoint.turn import Mode
from avibe.context.assemble import recollection
from avibe.errors import ModelError
from avibe.evals.strategy import Compacted, CompactionFailed, CompactState
from avibe.ports import ModelClient, StoredCheckpoint, TokenCounter
from avibe.record.checkpoint import Carry, MemoItem, Provenance
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolSpec

RECOLLECTION_KIND: Final = "checkpoint"  # ChatMessage.kind of the recollection in the replay's context
NAME: Final = "avibe-checkpoint"


def mode_for(model_name: str) -> Mode:
    """Vibey's choice (the same function `vibe run` uses): structured questions for local models."""
    from avibe.providers import is_local

    return driver_mode_for(is_local(model_name))


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
        on_text: Callable[[str], None] | None = None,
    ) -> ModelReply:
        self.calls += 1
        try:
            reply = self.model.complete(
                messages,
                tools,
                json_schema=json_schema,
                max_tokens=max_tokens,
                temperature=temperature,
                on_text=on_text,
            )
        except ModelError:
            self.tokens += self.counter.count_messages(messages)  # a failed call still cost its prompt
            raise
        reported = reply.usage.prompt_tokens + reply.usage.completion_tokens
        self.tokens += reported or self.counter.count_messages(messages) + self.counter.count(reply.text)
        return reply


@dataclass(frozen=True, slots=True)
class _Carry:
    """What one compaction hands to the next: the last checkpoint, unticked seqs (N6), V8's strikes."""

    checkpoint: dict[str, Any] | None = None
    dismissed: tuple[int, ...] = ()
    run: CheckpointRunState = field(default_factory=CheckpointRunState)
    number: int = 0
    known: dict[str, Any] = field(default_factory=dict)  # the replay's harness state (see _ReplayHarness)

    @classmethod
    def parse(cls, text: str) -> _Carry:
        if not text:
            return cls()
        data = json.loads(text)
        run = CheckpointRunState(data["failures"], data["too_little"])
        return cls(data["checkpoint"], tuple(data["dismissed"]), run, data["number"], data.get("known", {}))

    def dump(self) -> str:
        return json.dumps({"checkpoint": self.checkpoint, "dismissed": list(self.dismissed),
                           "failures": self.run.failures, "too_little": self.run.too_little,
                           "number": self.number, "known": self.known})  # fmt: skip

    def stored(self, session: str) -> StoredCheckpoint | None:
        c = self.checkpoint
        if c is None:
            return None
        at = datetime.fromisoformat(c["at"])
        memo = tuple(MemoItem.from_dict(item) for item in c["memo"])
        return StoredCheckpoint(session, self.number, at, c["mind"], memo, c["scene"], c["upto_seq"])


def _as_carried(stored: StoredCheckpoint) -> dict[str, Any]:
    memo = stored.memo_dicts()
    return {"mind": stored.mind, "memo": memo, "scene": stored.scene, "upto_seq": stored.upto_seq,
            "at": stored.at.isoformat()}  # fmt: skip


def _recollection_message(stored: StoredCheckpoint, number: int) -> ChatMessage:
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


_STARTED_JOB = re.compile(r"started background job (\S+)")
_JOB_LOG = re.compile(r"^log: (\S+)", re.MULTILINE)
_READS: Final = frozenset({"read_file", "read"})
_WRITES: Final = frozenset({"write_file", "edit_file", "write", "edit"})


@dataclass
class _ReplayHarness:
    """What Vibey's harness would know in the replayed session (its LiveState and job table): files read
    and written, the last failing call, the background jobs started and not yet reported. Built from the
    replay's tool calls and record as they go by, and carried between compactions (moved-out messages are
    gone from the context, but the harness remembers, as Vibey's does)."""

    files_read: list[str] = field(default_factory=list)
    files_modified: list[str] = field(default_factory=list)
    failure: list[str] | None = None
    jobs: dict[str, list[str]] = field(default_factory=dict)  # id -> [command, log, newest output line]
    commands: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, data: dict[str, Any]) -> _ReplayHarness:
        return cls(list(data.get("read", [])), list(data.get("modified", [])), data.get("failure"),
                   dict(data.get("jobs", {})), list(data.get("commands", [])),
                   list(data.get("finished", [])))  # fmt: skip

    def dump(self) -> dict[str, Any]:
        return {"read": self.files_read, "modified": self.files_modified, "failure": self.failure,
                "jobs": self.jobs, "commands": self.commands, "finished": self.finished}  # fmt: skip

    def see(self, messages: Sequence[ChatMessage], record: Sequence[Entry]) -> None:
        calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
        for message in messages:
            call = calls.get(message.tool_call_id or "") if message.role == "tool" else None
            if call is not None:
                self._tool(call.name, call.arguments, message.content)
        reported = [e.source.ref for e in record if e.kind == "callback" and e.source.ref]
        for job in reported:
            _remember(self.finished, job, 10)
        self.jobs = {job: info for job, info in self.jobs.items() if job not in reported}

    def _tool(self, name: str, arguments: Mapping[str, Any], output: str) -> None:
        path, command = arguments.get("path"), arguments.get("command")
        if isinstance(path, str) and name in _READS | _WRITES:
            _remember(self.files_read if name in _READS else self.files_modified, path, 50)
        if name == "shell" and isinstance(command, str) and command.strip():
            _remember(self.commands, command.strip(), 5)
        text, is_error = output.removeprefix("ERROR: "), output.startswith("ERROR: ")
        last = FailedCall(*self.failure) if self.failure else None
        failed = failure_after(last, name, arguments, text, is_error)
        if failed is not None:
            self.failure = [failed.name, failed.arguments, failed.error_line, failed.then]
        started = _STARTED_JOB.search(output)
        if started:
            log = _JOB_LOG.search(output)
            said = [line.strip() for line in output.splitlines() if line.strip()]
            own = [line for line in said if not (_STARTED_JOB.search(line) or _JOB_LOG.match(line))]
            command = str(arguments.get("command", ""))
            self.jobs[started.group(1)] = [command, log.group(1) if log else "", own[-1] if own else ""]

    def facts(self) -> HarnessFacts:
        waiting = tuple(WaitingJob(job, *info) for job, info in self.jobs.items())  # (older dumps: 2 fields)
        failure = FailedCall(*self.failure) if self.failure else None
        return HarnessFacts(waiting, tuple(self.files_read), tuple(self.files_modified), failure, (),
                            tuple(self.commands), tuple(self.finished))  # fmt: skip


def _remember(items: list[str], item: str, keep: int) -> None:
    """Newest first, deduplicated, bounded: as Vibey's LiveState keeps its lists."""
    items[:] = [item, *(i for i in items if i != item)][:keep]


@dataclass(frozen=True, slots=True)
class _Context:
    """The replay's context as the room loop's state: system prompt, recollection, conversation."""

    system: ChatMessage
    stored: StoredCheckpoint | None
    number: int
    conversation: tuple[ChatMessage, ...]
    dismissed: frozenset[int]

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        if self.stored is None:
            return (self.system, *self.conversation)
        return (self.system, _recollection_message(self.stored, self.number), *self.conversation)

    def base(self) -> list[ChatMessage]:
        return [m for m in self.messages if m.role == "system"]

    def adopt(self, result: CheckpointResult) -> _Context:
        assert result.checkpoint is not None
        number = self.number + 1
        stored = replace(result.checkpoint, number=number)
        dismissed = self.dismissed | result.dismissed
        return replace(
            self, stored=stored, number=number, conversation=tuple(result.kept), dismissed=dismissed
        )


@dataclass
class _ReplayOps:
    """`RoomOps` over the replay's context (Vibey's are over its live state and the record)."""

    driver: CheckpointDriver
    counter: TokenCounter
    budgets: Budgets
    facts: HarnessFacts = field(default_factory=HarnessFacts)

    def tokens(self, state: _Context) -> int:
        return self.counter.count_messages(state.messages)

    def trigger(self, tokens: int) -> TriggerDecision:
        # the replay calls `compact` only when its trigger (Vibey's, `trigger_fraction`) fired
        return TriggerDecision(True, self.budgets.threshold, "the replay's trigger", tokens)

    def checkpoint(
        self, state: _Context, tokens: int, action: Checkpoint | PartialCheckpoint
    ) -> tuple[_Context, CheckpointResult]:
        result = self.driver.run(view=state.messages, conversation=state.conversation, base_view=state.base(),
                                 previous=state.stored, budgets=self.budgets, dismissed=state.dismissed,
                                 turn_start=None, tools=(), carry=Carry(),
                                 provenance=Provenance(trigger=action.reason, tokens_before=tokens),
                                 partial=isinstance(action, PartialCheckpoint), facts=self.facts)  # fmt: skip
        return (state if result.checkpoint is None else state.adopt(result)), result

    def move_out(self, state: _Context, tokens: int, action: MoveOut) -> tuple[_Context, CheckpointResult]:
        made = Provenance(trigger=action.reason, tokens_before=tokens)
        result = self.driver.move_out_without_model(
            state.conversation, state.stored, self.budgets, None, Carry(), made
        )
        return (state if result.checkpoint is None else state.adopt(result)), result


def _limits(model: ModelClient, window: int, threshold: float) -> RoomLimits:
    facts = model.facts
    facts = replace(facts, window=window, max_output=min(facts.max_output, window // 4))
    return replace(limits_for(facts), threshold=int(window * threshold))


@dataclass(frozen=True, slots=True)
class AvibeCheckpoint:
    """Avibe's checkpoint (mind, memo, scene) through Vibey's room loop, policy and driver."""

    mode: Mode | None = None
    name: str = NAME

    def compact(
        self, state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        return _compact(state, model, counter, window, self.mode or mode_for(model.facts.name))


def _compact(
    state: CompactState, model: ModelClient, counter: TokenCounter, window: int, mode: Mode
) -> Compacted:
    carry = _Carry.parse(state.carry)
    limits = _limits(model, window, state.threshold)
    budgets = budgets_for(window, limits.threshold)
    conversation = tuple(m for m in state.messages[1:] if m.kind != RECOLLECTION_KIND)
    context = _Context(state.messages[0], carry.stored(state.session), carry.number, conversation,
                       frozenset(carry.dismissed))  # fmt: skip
    metered = _Metered(model, counter)
    known = _ReplayHarness.of(carry.known)
    known.see(conversation, state.record)
    with _work_dir() as tmp:
        clock = _FixedClock(state.record[-1].at)
        driver = CheckpointDriver(
            entries_lookup(state.record), metered, counter, state.session, tmp, clock, mode
        )
        ops = _ReplayOps(driver, counter, budgets, known.facts())
        room = make_room(context, ops, limits, carry.run)
    if room.stop is not None:
        why = "; ".join(r.reason for r in room.results if r.reason) or room.stop.reason
        raise CompactionFailed(f"the checkpoint could neither run nor move anything out: {why}")
    new = room.state
    carried = _as_carried(new.stored) if new.stored else None
    new_carry = _Carry(carried, tuple(sorted(new.dismissed)), room.run, new.number, known.dump())
    accepted = [r for r in room.results if r.checkpoint is not None]
    if not accepted:  # V5: a failed checkpoint changes nothing while the request still fits
        notes = tuple(r.reason for r in room.results if r.reason)
        meta = {
            "first_pass_valid": False,
            "repaired": False,
            "fallback": "failed" if room.results else "skipped",
        }
        return Compacted(state.messages, metered.tokens, metered.calls, new_carry.dump(), notes, meta)
    return _accepted(state, new, accepted[-1], new_carry.dump(), metered)


def memo_audit(memo: Sequence[MemoItem], record: Sequence[Entry]) -> dict[str, int]:
    """The memo's guarantees checked against the record, not taken on trust (N4, N7): how many entries,
    how many hold their record entry's text byte for byte (or a prefix + cut note, N5), and how many
    come from anything but a user message."""
    from avibe.checkpoint.memo import memo_text_matches

    by_seq = {entry.seq: entry for entry in record}
    verbatim = non_user = 0
    for item in memo:
        entry = by_seq.get(item.seq)
        verbatim += entry is not None and memo_text_matches(item, entry.text)
        non_user += entry is None or entry.source.kind != "user"
    return {"memo_entries": len(memo), "memo_verbatim": verbatim, "memo_non_user": non_user}


def _accepted(
    state: CompactState, new: _Context, result: CheckpointResult, carry: str, metered: _Metered
) -> Compacted:
    assert new.stored is not None
    made = new.stored.provenance
    completed = any(note.startswith(SCENE_COMPLETED) for note in made.notes)
    meta = {
        # V1-V3 on the first answer: the model-free move-out (V7) had no answer to validate; a scene the
        # harness had to complete is counted apart, not as the model's valid answer
        "first_pass_valid": result.fallback != "model-free" and not made.problems and not completed,
        "scene_completed": completed,
        "repaired": made.repair_used,
        "fallback": result.fallback,
        **memo_audit(new.stored.memo, state.record),
    }
    notes = (made.plan,) if made.plan else ()
    return Compacted(new.messages, metered.tokens, metered.calls, carry, notes, meta)
