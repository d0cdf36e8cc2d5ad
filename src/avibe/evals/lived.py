"""Avibe's checkpoint in the eval is Vibey living the transcript (E1): the session host and Vibey's own turn
loop (`avibe.agent.loop`), with a replay model that plays the transcript's assistant steps and a replay
toolbox that answers each call with its recorded output through the real tool's report path
(`avibe.evals.toolbox`). Vibey's own trigger (F1's decision, at the eval's threshold) decides when to make
room, its checkpoint calls go to the real model, and the compactions are read from the host's events -
nothing here keeps Vibey's books.

The transcript's turns, as a live session has them: the inputs before an assistant step are posted through
the host's delivery port, then a turn runs, and its steps are the assistant steps that follow. A background
input between two steps arrives mid-turn, through the host's sources (as a finished job's callback does).
Where the transcript goes on with the person's words, or ends, the replay model has no step to give: it
raises `TranscriptTurnEnded`, a ModelError, and Vibey ends the turn as it ends one whose model failed -
after making room for that request, as before every call. A recorded answer that another step follows
with no input between is played with that step as one reply (text and calls), so the turn goes on as a
live one does; only an answer the person's words or a background input follow ends the turn.
A last turn with no input makes room for the request the probes send, where the transcript's last turn
ended on an answer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from avibe.agent.config import RunConfig
from avibe.agent.live import shell_skill_load
from avibe.agent.loop import Vibey
from avibe.checkpoint.turn import Mode
from avibe.context.assemble import DEFAULT_RENDERING, Rendering
from avibe.errors import ModelError, StoreError
from avibe.evals.checkpoint import checkpoint_meta, failed_meta, labelled
from avibe.evals.rendering import META_ENDED, META_KEY
from avibe.evals.replay import Compaction, source_of
from avibe.evals.scenario import AssistantTurn, BackgroundInput, Event, Scenario
from avibe.evals.toolbox import ERROR_PREFIX, ReplayToolBox, as_avibe
from avibe.host import events as ev
from avibe.host.session import SessionHost
from avibe.ports import (
    CompletionRequest,
    ModelClient,
    RecordStore,
    StoredCheckpoint,
    TokenCounter,
    ToolResult,
)
from avibe.record.entries import Entry, EntryQuery
from avibe.record.messages import ChatMessage, ModelFacts, ModelReply, ToolCall
from avibe.store import open_store


class TranscriptTurnEnded(ModelError):
    """The transcript records no further step in this turn: the person speaks next, or it ends."""


class _Clock:
    """The transcript's time: each event one simulated minute after the last (as `replay.to_steps`)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


@dataclass
class _Transcript:
    """The transcript's events with a cursor, the recorded step being played, and the replay toolbox."""

    scenario: Scenario
    clock: _Clock
    box: ReplayToolBox = field(default_factory=ReplayToolBox)
    skills: dict[str, str] = field(default_factory=dict)  # a loaded skill's text, as its load returned it
    at: int = 0  # the next event's index
    step: AssistantTurn | None = None
    past_end: bool = False  # the replay model was asked for a step after the last event

    def peek(self) -> Event | None:
        return self.scenario.events[self.at] if self.at < len(self.scenario.events) else None

    def take(self) -> Event:
        event = self.scenario.events[self.at]
        self.at += 1
        self.clock.at = self.scenario.start + timedelta(minutes=self.at)
        return event

    def post(self, host: SessionHost) -> None:
        """The input at the cursor through the host's delivery port (a job's callback: waited for no more)."""
        event = self.take()
        host.post(source_of(event), event.text)
        if isinstance(event, BackgroundInput) and event.source == "callback" and event.ref:
            self.box.finished(event.ref)

    # ---- the replay model's and the toolbox's side ------------------------------------------------------

    def next_step(self) -> AssistantTurn:
        event = self.peek()
        if not isinstance(event, AssistantTurn):
            self.past_end = event is None
            raise TranscriptTurnEnded("the transcript records no further step in this turn")
        self.take()
        while not event.tool_uses and isinstance(following := self.peek(), AssistantTurn):
            # An answer another step follows with nothing between: one reply, as a live turn has it (a
            # model's text and its calls come together; Claude Code's JSONL writes them as two lines).
            self.take()
            event = replace(following, text="\n\n".join(t for t in (event.text, following.text) if t))
        self.step = event
        return event

    def run_tool(self, call: ToolCall) -> ToolResult:
        """The step's recorded output for `call`, as the Avibe tool it stands for reports it."""
        uses = self.step.tool_uses if self.step else ()
        use = next((u for u in uses if u.id == call.id), None)
        output = "" if use is None else (ERROR_PREFIX if use.is_error else "") + use.output
        avibe, result = self.box.result(call, output)
        loaded = result.skill_loaded or (None if result.is_error else shell_skill_load(avibe))
        if loaded:
            self.skills[loaded] = result.output
        return result


@dataclass
class _MidTurn:
    """A host source: the background inputs the transcript shows between two steps arrive mid-turn."""

    transcript: _Transcript
    host: SessionHost | None = None

    def poll(self) -> None:
        while self.host is not None and isinstance(self.transcript.peek(), BackgroundInput):
            self.transcript.post(self.host)

    def waiting_for(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        pass


class ReplayModel:
    """The agent's steps as the transcript recorded them (text and tool calls, each call as the Avibe tool
    it stands for); `TranscriptTurnEnded` where the transcript's turn ends."""

    def __init__(self, facts: ModelFacts, transcript: _Transcript, warm: ModelClient | None = None) -> None:
        self._facts, self.transcript, self.warm = facts, transcript, warm

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        if request.json_schema is not None:  # the answer Vibey asks for after a loop stop: none recorded
            raise TranscriptTurnEnded("the transcript records no answer in words here")
        if self.warm is not None:  # the step's request reaches the model's prompt cache, as in a session
            with contextlib.suppress(ModelError):  # a context the model cannot take: the room meets it
                self.warm.complete(replace(request, max_tokens=1, on_text=None))
        step = self.transcript.next_step()
        calls = tuple(as_avibe(ToolCall(u.id, u.name, dict(u.arguments))) for u in step.tool_uses)
        return ModelReply(step.text, calls)


class Metered:
    """Counts what the checkpoint's calls cost, the same way the baselines' summaries are counted."""

    def __init__(self, model: ModelClient, counter: TokenCounter) -> None:
        self.model, self.counter = model, counter
        self.tokens = self.calls = 0

    @property
    def facts(self) -> ModelFacts:
        return self.model.facts

    def complete(self, request: CompletionRequest) -> ModelReply:
        self.calls += 1
        messages = request.messages
        try:
            reply = self.model.complete(request)
        except ModelError:
            self.tokens += self.counter.count_messages(messages)  # a failed call still cost its prompt
            raise
        reported = reply.usage.prompt_tokens + reply.usage.completion_tokens
        self.tokens += reported or self.counter.count_messages(messages) + self.counter.count(reply.text)
        return reply


@dataclass
class _Replaying(Vibey):
    """Vibey with the eval's system prompt (the one every strategy's replay starts with)."""

    prompt: str = ""

    def system_prompt(self) -> str:
        return self.prompt


@dataclass
class _Attempt:
    """One checkpoint attempt or model-free move-out (V7), as the host's events told it."""

    at_seq: int
    before: int
    started: float
    spent: int  # the meter's figures when it started
    calls: int


@dataclass
class _Run:
    """One transcript lived by Vibey through the host, measured from the host's events."""

    vibey: Vibey
    host: SessionHost
    transcript: _Transcript
    meter: Metered
    renderings: tuple[Rendering, ...]
    on_compaction: Callable[[Compaction], None] | None = None
    compactions: list[Compaction] = field(default_factory=list)
    peak: int = 0
    attempt: _Attempt | None = None

    # ---- the host's events ------------------------------------------------------------------------------

    def __call__(self, event: object) -> None:
        if isinstance(event, ev.CheckpointStarted):
            self.attempt = self._open(event.tokens)
        elif isinstance(event, ev.CheckpointFailed):
            self._close(self.attempt or self._open(0), None, event.reason)
        elif isinstance(event, ev.CheckpointAccepted | ev.CheckpointFallback):
            self._close(self.attempt or self._open(event.before), event, "")
        elif isinstance(event, ev.ModelStarted):  # the request went out
            self.peak = max(self.peak, event.view_tokens)

    def _open(self, before: int) -> _Attempt:
        self.peak = max(self.peak, before)  # the request would have carried this much
        seq = self.host.store.get_session(self.vibey.session_id).entry_count
        return _Attempt(seq, before, time.monotonic(), self.meter.tokens, self.meter.calls)

    def _close(
        self, attempt: _Attempt, saved: ev.CheckpointAccepted | ev.CheckpointFallback | None, why: str
    ) -> None:
        self.attempt = None
        calls, spent = self.meter.calls - attempt.calls, self.meter.tokens - attempt.spent
        if saved is None and not calls:
            return  # nothing happened
        seconds = round(time.monotonic() - attempt.started, 2)
        if saved is not None:
            stored = self._stored(saved.number)
            meta = {**checkpoint_meta(stored, self.record()), **self._rendered(stored)}
            notes, after = (stored.provenance.plan,), saved.after
        else:  # V5: a failed checkpoint changes nothing while the request still fits
            meta, notes, after = failed_meta([why]), (why,), attempt.before
        compaction = Compaction(attempt.at_seq, attempt.before, after, spent, calls,
                                tuple(n for n in notes if n), meta, saved is not None, seconds)  # fmt: skip
        self.compactions.append(compaction)
        if self.on_compaction is not None:
            self.on_compaction(compaction)

    def _stored(self, number: int) -> StoredCheckpoint:
        saved = self.host.store.list_checkpoints(self.vibey.session_id)
        return next(c for c in saved if c.number == number)

    def _rendered(self, stored: StoredCheckpoint) -> dict[str, Any]:
        """The checkpoint's recollection in each rendering asked, as shown now and once its turn ended."""
        if not self.renderings:
            return {}
        state = self.vibey.load_state()
        viewers = {r: replace(self.vibey.viewer, rendering=r) for r in self.renderings}
        ended = replace(state, turn_user_seqs=())
        return {META_KEY: {r: v.recollection(state, stored) for r, v in viewers.items()},
                META_ENDED: {r: v.recollection(ended, stored) for r, v in viewers.items()}}  # fmt: skip

    def record(self) -> tuple[Entry, ...]:
        return tuple(self.host.store.query(EntryQuery(self.vibey.session_id)))

    # ---- living it -------------------------------------------------------------------------------------

    def live(self) -> None:
        """Each transcript turn through the host; then the request the probes send makes its room."""
        transcript = self.transcript
        while transcript.peek() is not None:
            while transcript.peek() is not None and not isinstance(transcript.peek(), AssistantTurn):
                transcript.post(self.host)
            self.vibey.run_turn(self.host, self)
        if not transcript.past_end:
            self.vibey.run_turn(self.host, self)

    def context(self) -> tuple[ChatMessage, ...]:
        return labelled(self.vibey.view(self.vibey.load_state()))


class Lived(NamedTuple):
    """What living a transcript came to, as the replay reports it."""

    context: tuple[ChatMessage, ...]  # the request Vibey sends next (its view), recollection labelled
    compactions: tuple[Compaction, ...]
    record: tuple[Entry, ...]
    peak: int  # the largest request it sent or would have sent before making room
    saved: tuple[StoredCheckpoint, ...]  # every checkpoint, oldest first


def _session(store: RecordStore, scenario: Scenario) -> str:
    """The scenario's id as the session's (the checkpoint's prompts name it), or a new id where the store
    would refuse it."""
    try:
        return str(store.create_session(title=scenario.id[:200], session_id=scenario.id).id)
    except (ValueError, StoreError):
        return str(store.create_session(title=scenario.id[:200]).id)


def live(
    scenario: Scenario,
    model: ModelClient,
    counter: TokenCounter,
    window: int,
    *,
    mode: Mode,
    threshold: int,
    system_prompt: str,
    renderings: Sequence[Rendering] = (),
    on_compaction: Callable[[Compaction], None] | None = None,
    work: Path,
    warm: ModelClient | None = None,
) -> Lived:
    """Vibey lives `scenario` on a scratch record; (final context, compactions, record, peak, the
    checkpoints saved) as the replay reports them. `work` is the session folder (F2's work files); `warm`, a
    model each agent step's request also goes to, uncounted (its prompt cache then holds what a session's
    steps sent before a checkpoint)."""
    store = open_store("sqlite://", in_memory=True)
    session = _session(store, scenario)
    clock = _Clock(scenario.start)
    transcript = _Transcript(scenario, clock)
    meter = Metered(model, counter)
    steps = len(scenario.events) + 2  # a transcript's turn is as long as it was recorded
    config = RunConfig(window=window, max_steps=steps, checkpoint_mode=mode, user_name=scenario.user,
                       threshold=threshold)  # fmt: skip
    steps_model = ReplayModel(replace(model.facts, window=window), transcript, warm)
    vibey = _Replaying(store, steps_model, counter, clock, session, work, (), transcript.run_tool,
                       config=config, skill_text=transcript.skills.get, waiting_for=transcript.box.waiting,
                       checkpoint_model=meter, prompt=system_prompt)  # fmt: skip
    mid_turn = _MidTurn(transcript)
    host = SessionHost(store, session, vibey, clock, sources=[mid_turn])
    mid_turn.host = host
    wanted = tuple(dict.fromkeys((DEFAULT_RENDERING, *renderings))) if renderings else ()
    run = _Run(vibey, host, transcript, meter, wanted, on_compaction)
    run.live()
    context = run.context()
    run.peak = max(run.peak, counter.count_messages(context))
    saved = tuple(store.list_checkpoints(session))
    return Lived(context, tuple(run.compactions), run.record(), run.peak, saved)
