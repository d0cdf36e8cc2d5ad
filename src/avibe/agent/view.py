"""The request as it goes out (F4): system prompt, the checkpoint as recollection, the live context - derived
and counted once per state. Vibey and the eval's `avibe-checkpoint` strategy derive it the same way.

Pure apart from the token counter and the current skill text it is given (both ports).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from avibe.agent.driver import checkpoint_from_stored, empty_checkpoint
from avibe.agent.state import LiveState
from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.carry import LoadedSkill as CarrySkill
from avibe.checkpoint.carry import PutBackSkill, record_pointer, skills_to_put_back
from avibe.checkpoint.mind import strip_guidance
from avibe.context.assemble import DEFAULT_RENDERING, Rendering, assemble, recollection
from avibe.ports import StoredCheckpoint, TokenCounter
from avibe.record.checkpoint import render_plan
from avibe.record.messages import ChatMessage, ToolSpec

# Counted every step: when a calibrating counter changes its factor, cached message counts are stale.
_PROBE: Final = "Avibe counts this probe text each step to notice when the token counter recalibrates."


class MessageCounts:
    """Token counts of the live messages. With an additive counter (a request's count is a constant plus
    its messages' counts: the tiktoken estimates), each message is counted once while it stays in the
    context, so a step tokenises only what is new. A chat template's exact count (the embedded model's) is
    not additive - the template frames the whole list - so there the view is counted whole, once a step."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.additive = bool(getattr(counter, "additive", False))
        self._by_id: dict[int, tuple[ChatMessage, int]] = {}
        self._probe = -1
        self._empty = 0

    def refresh(self) -> None:
        if not self.additive:
            return
        probe = self.counter.count(_PROBE)
        if probe != self._probe:
            self._probe, self._by_id = probe, {}
            self._empty = self.counter.count_messages(())

    def total(self, messages: Sequence[ChatMessage]) -> int:
        if not self.additive:
            return self.counter.count_messages(messages) if messages else 0
        total, seen = self._empty, {}
        for message in messages:
            hit = self._by_id.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, self.counter.count_messages([message]) - self._empty)
            seen[id(message)] = hit
            total += hit[1]
        self._by_id = seen  # forget messages that left the context
        return total


def tool_tokens(counter: TokenCounter, specs: Sequence[ToolSpec]) -> int:
    """The tool list's cost: it does not change within a run."""
    return sum(counter.count(f"{t.name} {t.description} {t.parameters}") for t in specs)


@dataclass
class View:
    """The view of one live state under one checkpoint, derived and counted once."""

    state: LiveState
    stored: StoredCheckpoint | None
    messages: list[ChatMessage]
    tokens: int


@dataclass
class Viewer:
    """Derives views. The recollection is fixed per checkpoint and turn, so the request prefix stays the
    same from call to call and the prompt cache holds; skills are read at their current version once a turn
    (`new_turn`)."""

    counter: TokenCounter
    session_id: str
    system: str
    tools: int  # the tool list's tokens
    budgets: Budgets
    record_where: str = "Avibe's record database"
    skill_text: Callable[[str], str | None] = lambda name: None  # a skill's CURRENT text (A1)
    # How the recollection is shown (`[context] recollection`): never what it holds
    rendering: Rendering = DEFAULT_RENDERING
    # Whether a user's message about the memo's rules is followed by them (`agent.driver.reminds`)
    remind: bool = True
    counts: MessageCounts = field(init=False)
    # The skills a checkpoint puts back, read at their current version once a turn (A1), by checkpoint
    _skills: dict[int, tuple[PutBackSkill, ...]] = field(default_factory=dict, init=False, repr=False)
    # The recollection rendered, by (checkpoint, current request still running, skills put back): kept
    # from turn to turn while nothing it is made of changed (its memo is read for tag-like lines, T2).
    _recollections: dict[tuple[int, bool, tuple[PutBackSkill, ...]], str] = field(
        default_factory=dict, init=False, repr=False
    )
    _last: View | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.counts = MessageCounts(self.counter)

    def new_turn(self, system: str | None = None) -> None:
        """A turn starts: skills are read again at their current version (A1), and the system prompt, when
        given, is the one rebuilt for this turn (F4: an AGENTS.md edited mid-chat is seen now)."""
        self._skills.clear()
        if system is not None and system != self.system:
            self.system, self._last = system, None

    def adopt(self) -> None:
        """A new checkpoint replaces the recollection."""
        self._skills.clear()
        self._recollections.clear()

    def put_back(self, stored: StoredCheckpoint) -> list[PutBackSkill]:
        loaded = []
        for item in stored.carry.skills:
            text = self.skill_text(item.name)
            if text is not None:  # a skill deleted since is not put back
                loaded.append(CarrySkill(item.name, text, item.order))
        return skills_to_put_back(loaded, self.counter, self.budgets)

    def recollection(self, state: LiveState, stored: StoredCheckpoint | None) -> str:
        """The checkpoint as recollection: skills (A1), files (A2), the interrupted request (F5), the plan."""
        if stored is None:
            return ""
        interrupted = stored.carry.current_request_seqs
        still_running = bool(interrupted) and interrupted[0] in state.turn_user_seqs
        skills = self._skills.get(stored.number)
        if skills is None:
            skills = self._skills[stored.number] = tuple(self.put_back(stored))
        key = (stored.number, still_running, skills)
        if key not in self._recollections:
            if len(self._recollections) >= 8:  # a skill edited turn after turn: keep the latest few
                self._recollections.clear()
            checkpoint = checkpoint_from_stored(stored)
            assert checkpoint is not None  # a stored checkpoint always converts
            self._recollections[key] = recollection(
                checkpoint,
                number=stored.number,
                skills=list(skills),
                files=stored.carry.files,
                pointer=record_pointer(self.session_id, self.record_where),
                current_request_seqs=interrupted if still_running else (),
                plan=render_plan(stored.carry.plan),
                rendering=self.rendering,
            )
        return self._recollections[key]

    def view(self, state: LiveState, stored: StoredCheckpoint | None) -> list[ChatMessage]:
        """The request: with a checkpoint, its memo's rules that the newest user message is about are
        restated after that message (`avibe.context.reminder.reminder`), for a model that `remind`s."""
        memo = stored.memo if stored is not None and self.remind else ()
        return assemble(self.system, self.recollection(state, stored), state.messages, memo)

    def base(self, state: LiveState, stored: StoredCheckpoint | None) -> list[ChatMessage]:
        """The view without the live context: what stays in every request."""
        return assemble(self.system, self.recollection(state, stored), ())

    def tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.counts.total(messages) + self.tools

    def derive(self, state: LiveState, stored: StoredCheckpoint | None) -> View:
        """The room policy, the trigger and the model call of one step all use this one count."""
        last = self._last
        if last is not None and last.state is state and last.stored is stored:
            return last
        messages = self.view(state, stored)
        self._last = View(state, stored, messages, self.tokens(messages))
        return self._last


def fresh_checkpoint_for_display(stored: StoredCheckpoint | None) -> str:
    """The last checkpoint as the user sees it at the end of `vibe demo` (mission, scene, memo)."""
    checkpoint = checkpoint_from_stored(stored) or empty_checkpoint()
    memo = "\n".join(f"  #{item.seq}: {item.text}" for item in checkpoint.memo) or "  (empty)"
    mind = strip_guidance(checkpoint.mind).strip()
    return f"{mind}\n\n{checkpoint.scene.strip()}\n\nMemo (the user's own words):\n{memo}"
