"""Claude Code, Codex or OpenCode as the session host's Agent, run as they are (SPEC L5, T3). The program
itself is an adapter (`avibe.backends`) that the edge hands in as an `AgentProgram`: one turn, prompt in,
activity out as host events, reply back."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Protocol

from avibe.errors import BackendError
from avibe.host.agent import Inbox, Input, TurnResult
from avibe.host.events import EventSink, Replied, Stopped, TurnEnded, TurnStarted
from avibe.ingress import record_reply
from avibe.ports import Clock, Delivery, RecordStore
from avibe.record.entries import CallRecord, Source
from avibe.record.state import AgentState, BackendState

log = logging.getLogger("avibe.backends")


@dataclass(frozen=True, slots=True)
class ProgramReply:
    """A program's turn that ended in a reply: its text, the program's own session id (to continue it
    next time), and the tool calls it made on the way."""

    reply: str
    backend_session: str
    calls: tuple[CallRecord, ...] = ()


class AgentProgram(Protocol):
    """One turn of an external program: `prompt` (the harness-rendered inputs), `session` (its own id to
    continue, "" for a new one); its tool calls go to `emit` as they happen. Raises BackendError when the
    turn did not end in a reply (it crashed, reported an error, hung)."""

    def __call__(self, prompt: str, *, session: str, emit: EventSink) -> ProgramReply: ...


class ChangeWatch(Protocol):
    """What the program changes in the files Avibe marks (AGENTS.md, skills)."""

    def settle(self) -> None: ...
    def agent_changed(self, seq: int) -> None: ...


class BackendAgent:
    """An external program as the host's Agent. Each turn hands it every new input as the harness
    rendered it (`Input.text`: the source tag line first, T1-T3), records its reply as an assistant entry
    of this agent with its tool calls, and continues the same backend session. A failure (it crashed,
    reported an error, hung) is posted as a harness input with its exit code and last stderr lines; the
    agent does not wake for its own notice, and the next input's turn carries it. Never checkpoints (L5)."""

    def __init__(
        self,
        name: str,
        program: AgentProgram,
        *,
        store: RecordStore,
        session_id: str,
        clock: Clock,
        post: Delivery,
        watch: ChangeWatch | None = None,
    ) -> None:
        self._name, self.program, self.store, self.session_id = name, program, store, session_id
        self.clock, self.post = clock, post
        self.watch = watch  # what the program leaves in AGENTS.md and skills is marked
        self.state = BackendState.from_stored(store.load_state(session_id, BackendState.key(name)), name)
        store.save_state(session_id, AgentState.KEY, AgentState(name).to_dict())

    @property
    def name(self) -> str:
        return self._name

    def cursor(self) -> int:
        return self.state.cursor

    def _save(self, state: BackendState) -> None:
        self.state = state
        self.store.save_state(self.session_id, BackendState.key(self.name), state.to_dict())

    def run_turn(self, inbox: Inbox, emit: EventSink) -> TurnResult:
        inputs = inbox.after(self.state.answered)
        fresh = [i for i in inputs if i.role == "user"]  # its own (and other agents') replies are not input
        if not fresh:
            return TurnResult("")
        emit(TurnStarted(self.session_id, self.name))
        self._save(replace(self.state, cursor=max(self.state.cursor, inputs[-1].seq)))
        if self.watch is not None:
            self.watch.settle()
        try:
            outcome = self.program(prompt_text(fresh), session=self.state.session, emit=emit)
        except BackendError as exc:
            if self.watch is not None:  # what it wrote before it failed, at the input it worked on
                self.watch.agent_changed(self.state.cursor)
            return self._failed(str(exc), emit)
        entry = record_reply(
            self.store, self.session_id, outcome.reply, agent=self.name, clock=self.clock, calls=outcome.calls
        )
        if self.watch is not None:  # whatever the program changed this turn: its reply's step
            self.watch.agent_changed(entry.seq)
        self._save(BackendState(outcome.backend_session or self.state.session, entry.seq, entry.seq))
        emit(Replied(outcome.reply))
        emit(TurnEnded(outcome.reply, False, len(outcome.calls) + 1, 0))
        return TurnResult(outcome.reply, steps=len(outcome.calls) + 1)

    def _failed(self, message: str, emit: EventSink) -> TurnResult:
        log.warning("session %s: %s", self.session_id, message)
        notice = self.post(Source("harness", name=self.name), message)
        # its own notice does not wake it; the next input's turn carries it
        self._save(replace(self.state, cursor=notice.seq))
        emit(Stopped(message.split("\n", 1)[0]))
        emit(TurnEnded("", True, 0, 0))
        return TurnResult("", stopped=True)


def prompt_text(inputs: list[Input]) -> str:
    """The text handed to the program: each input exactly as the harness rendered it (its tag line first
    for anything the person did not type; T2's name in front of a person's tag-like line), one after the
    other with a blank line between. Nothing in a person's text can pass for a tag line (T2), so nothing
    can pass for the start of another input."""
    return "\n\n".join(i.text for i in inputs)
