"""Plans: what moves out of the live context, and every fallback when no checkpoint can be made
(V5-V9, U3, F5).

API:
    MovePlan(moved, kept, freed_tokens, reason)           .moved_seqs, .upto_seq, .is_empty
    plan_move_out(messages, counter, recent_budget, current_turn_start) -> MovePlan
    partial_plan(messages, counter, room, attempt, current_turn_start) -> MovePlan | None   (V6)
    ModelFreeMoveOut(plan, checkpoint, reason)                                             (V7)
    model_free_move_out(messages, counter, previous | None, moved_entries, budgets, current_turn_start)
        -> ModelFreeMoveOut
    CheckpointRunState(failures, too_little)  may_try_checkpoint(state) -> bool             (V8)
    record_attempt(state, freed_tokens, needed, *, failed=False) -> CheckpointRunState
    needed_to_free(tokens, threshold) -> int           V8: what a checkpoint must free (room to work too)
    cut_tool_output(message, counter, max_tokens) -> ChatMessage   (ValueError: note won't fit) (V9)
    output_caps(sizes, budget) -> list[int]     V9 for a step of many calls: each output's most tokens
    cut_step_outputs(outputs, counter, budget) -> tuple[ChatMessage, ...]   the newest step's outputs cut
                                                 to fit `budget` together, the largest first
    StopDecision(stop, reason, message)  too_long_to_continue(parts, limit, movable_tokens) (U3)
    movable_units(messages, current_turn_start) -> list[range]   movable_tokens(messages, counter, start)
    request_parts(messages, counter, current_turn_start, *, system_prompt, tool_list, checkpoint) (U3)

`messages` is the conversation part of the live context - what follows the system prompt and the
recollection - in time order. Messages move out in *units*: an assistant message with tool calls goes
together with the tool results that answer it, so no plan ever splits a call from its output. Two kinds of
unit never move: the current turn's user messages (pinned, F5) and the newest unit (the step the model is
working on; V9 cuts its output instead). Pinned messages never make a plan empty: the units after them
move out around them, so "nothing left to move out" (U3) means that only those two are left. Every
decision is data with a `reason`, so the driver can log why a fallback was taken (DESIGN).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from avibe.checkpoint.budgets import LASTING_SHARE, Budgets
from avibe.checkpoint.memo import cut_message
from avibe.checkpoint.mind import EMPTY_MIND
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.scene import with_latest_request
from avibe.ports import TokenCounter
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage

MAX_PARTIAL_TRIES: Final = 2
MAX_STRIKES: Final = 2  # V8: two failed or too-little checkpoints in one run end checkpointing
# V8: a checkpoint must leave room to work, not only get under the trigger: one that leaves less than this
# share of the threshold free is "too little" (in a small window the next one came two steps later, and
# the run spent its time checkpointing)
MIN_ROOM_SHARE: Final = 0.1
U3_MESSAGE: Final = (
    "This conversation is too long to continue reliably. Please send /new to start a new session."
)


@dataclass(frozen=True, slots=True)
class MovePlan:
    """Which messages leave the live context (`moved`, oldest first) and which stay (`kept`, in order)."""

    moved: tuple[ChatMessage, ...]
    kept: tuple[ChatMessage, ...]
    freed_tokens: int
    reason: str

    @property
    def is_empty(self) -> bool:
        return not self.moved

    @property
    def moved_seqs(self) -> tuple[int, ...]:
        """Record numbers of the moved inputs and replies (tool output has none, A3)."""
        return tuple(m.seq for m in self.moved if m.seq is not None)

    @property
    def upto_seq(self) -> int | None:
        return max(self.moved_seqs, default=None)


# ---- units: a tool call never leaves without its results ------------------------------------------------


def _units(messages: Sequence[ChatMessage]) -> list[range]:
    """Index ranges that move together: an assistant message with tool calls plus the tool messages
    that follow it; every other message alone."""
    units: list[range] = []
    i = 0
    while i < len(messages):
        end = i + 1
        if messages[i].role == "assistant" and messages[i].tool_calls:
            while end < len(messages) and messages[end].role == "tool":
                end += 1
        units.append(range(i, end))
        i = end
    return units


def _tokens(messages: Sequence[ChatMessage], unit: range, counter: TokenCounter) -> int:
    return counter.count_messages([messages[i] for i in unit])


def _pinned(message: ChatMessage, index: int, current_turn_start: int | None) -> bool:
    """F5: the person's own messages of the current turn stay verbatim. Chosen by record kind (N7), so a
    callback or watch input of the same turn is not pinned as "the user's request"."""
    return current_turn_start is not None and index >= current_turn_start and message.kind == "user"


def _unit_pinned(messages: Sequence[ChatMessage], unit: range, current_turn_start: int | None) -> bool:
    return any(_pinned(messages[i], i, current_turn_start) for i in unit)


def movable_units(messages: Sequence[ChatMessage], current_turn_start: int | None = None) -> list[range]:
    """The units a plan may move out, oldest first (U3): every unit except the pinned ones (the current
    turn's user messages, F5) and the newest unit (the step the model is working on; V9 cuts its output
    instead). The current request is what is left when this list is empty."""
    units = _units(messages)[:-1]
    return [unit for unit in units if not _unit_pinned(messages, unit, current_turn_start)]


def movable_tokens(
    messages: Sequence[ChatMessage], counter: TokenCounter, current_turn_start: int | None = None
) -> int:
    """Tokens of every movable unit together: what `too_long_to_continue` needs as `movable_tokens`."""
    moving = [messages[i] for unit in movable_units(messages, current_turn_start) for i in unit]
    return counter.count_messages(moving) if moving else 0


def _split(
    messages: Sequence[ChatMessage],
    counter: TokenCounter,
    cut: int,
    current_turn_start: int | None,
    reason: str,
) -> MovePlan:
    """Move out messages[:cut] except pinned ones; keep the rest."""
    moved = [m for i, m in enumerate(messages[:cut]) if not _pinned(m, i, current_turn_start)]
    kept = [m for i, m in enumerate(messages[:cut]) if _pinned(m, i, current_turn_start)]
    kept.extend(messages[cut:])
    freed = counter.count_messages(moved) if moved else 0
    return MovePlan(moved=tuple(moved), kept=tuple(kept), freed_tokens=freed, reason=reason)


def plan_move_out(
    messages: Sequence[ChatMessage],
    counter: TokenCounter,
    recent_budget: int,
    current_turn_start: int | None = None,
) -> MovePlan:
    """Keep the newest units that fit `recent_budget` (F4); move out everything older, oldest first.

    The newest unit always stays, even over budget: it is what the model is working on (V9 cuts an
    oversized tool output separately). `current_turn_start` is the index of the current turn's first
    message, or None between turns.
    """
    units = _units(messages)
    if not units:
        return MovePlan((), (), 0, "nothing to move out: the conversation is empty")
    used, first_kept = 0, len(units)
    for k in range(len(units) - 1, -1, -1):
        cost = _tokens(messages, units[k], counter)
        if k < len(units) - 1 and used + cost > recent_budget:
            break
        used, first_kept = used + cost, k
    cut = units[first_kept].start if first_kept < len(units) else len(messages)
    plan = _split(messages, counter, cut, current_turn_start, "")
    reason = (
        f"move out {len(plan.moved)} oldest messages ({plan.freed_tokens} tokens); keep {len(plan.kept)} "
        f"recent ones ({used} tokens within the recent budget of {recent_budget})"
    )
    if plan.is_empty and cut > 0:
        reason = "nothing to move out: every older message is the current request (F5)"
    elif plan.is_empty:
        reason = f"nothing to move out: the recent messages ({used} tokens) fit the budget of {recent_budget}"
    return replace(plan, reason=reason)


def _older_part(
    messages: Sequence[ChatMessage], counter: TokenCounter, limit: int, current_turn_start: int | None
) -> int:
    """The cut index of the largest unit-aligned prefix whose movable units total at most `limit` tokens.

    Pinned units (F5) neither count nor end the prefix: they stay wherever the cut falls (`_split`), so a
    pinned message at the start of the conversation never makes the cut empty (U3)."""
    used, cut = 0, 0
    for unit in movable_units(messages, current_turn_start):
        cost = _tokens(messages, unit, counter)
        if used + cost > limit:
            break
        used, cut = used + cost, unit.stop
    return cut


def _oldest_movable(messages: Sequence[ChatMessage], current_turn_start: int | None) -> range | None:
    units = movable_units(messages, current_turn_start)
    return units[0] if units else None


def partial_plan(
    messages: Sequence[ChatMessage],
    counter: TokenCounter,
    room: int,
    attempt: int,
    current_turn_start: int | None = None,
) -> MovePlan | None:
    """V6: the conversation is too large for one checkpoint turn, so checkpoint only its older part.

    `room` is how many conversation tokens a checkpoint turn can carry (window minus system prompt,
    recollection, request and reply reserve). Attempt 1 takes at most half the conversation - or, when the
    oldest movable unit alone is over half but fits `room`, that unit alone (the smallest step there is);
    attempt 2 at most a quarter (the first may have failed for size); there is no third (None). Pinned
    messages (F5) stay and do not count. None also when not even one unit fits - the caller then falls
    back to the model-free move-out (V7).
    """
    if attempt < 1 or attempt > MAX_PARTIAL_TRIES:
        return None
    total = counter.count_messages(messages) if messages else 0
    limit = min(room, total // (2**attempt))
    cut = _older_part(messages, counter, limit, current_turn_start)
    oldest = _oldest_movable(messages, current_turn_start)
    if cut == 0 and attempt == 1 and oldest is not None and _tokens(messages, oldest, counter) <= room:
        cut = oldest.stop  # the oldest movable unit alone is over half: it is the smallest step there is
    plan = _split(messages, counter, cut, current_turn_start, "")
    if plan.is_empty:
        return None
    share = "half" if attempt == 1 else "quarter"
    return replace(
        plan,
        reason=(
            f"partial checkpoint, try {attempt} of {MAX_PARTIAL_TRIES}: the older {share} at most "
            f"({plan.freed_tokens} of {total} tokens; a checkpoint turn has room for {room})"
        ),
    )


# ---- V7: the model-free move-out --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelFreeMoveOut:
    """The oldest half moved out without the model. `checkpoint` keeps the previous mind and scene and a
    memo holding the previous memo plus every moved-out user message (cut, with a pointer)."""

    plan: MovePlan
    checkpoint: Checkpoint
    reason: str


def _latest_request(messages: Sequence[ChatMessage]) -> ChatMessage | None:
    """The user's newest message in the conversation, by its record kind (N7), never by its text."""
    return next((m for m in reversed(messages) if m.kind == "user" and m.seq is not None), None)


def _scene_for(previous: str, messages: Sequence[ChatMessage]) -> str:
    """V7 keeps the previous scene, S4 wants the next step to quote the user's latest request: the two
    agree where the scene already quotes it. A scene written before the latest request came keeps all its
    parts - the model wrote them, and V7 calls no model to rewrite them - and gets a next step quoting the
    request (the old next step follows it, as what was next before); with no scene at all, the harness's
    own scene says only what it knows, the request quoted among it."""
    latest = _latest_request(messages)
    if latest is None or latest.seq is None:
        return previous
    return with_latest_request(previous, latest.seq, latest.content)


def model_free_move_out(
    messages: Sequence[ChatMessage],
    counter: TokenCounter,
    previous: Checkpoint | None,
    moved_entries: Sequence[Entry],
    budgets: Budgets,
    current_turn_start: int | None = None,
) -> ModelFreeMoveOut:
    """V7: move out about the oldest half; no model call. The caller keeps the previous skills as they are.
    With no previous checkpoint the mind is the empty template and the scene empty. When the oldest
    movable unit alone is over half, it goes alone; the plan is empty only when no unit is movable
    (`movable_units`), which is when U3 may stop.

    `moved_entries` are the record entries behind the moved messages (the driver queries them by
    `plan.moved_seqs`); only kind "user" ones enter the memo (N7). The memo keeps every one of them, even
    past the memo's total budget: this fallback would rather keep too much than too little (V4), and the
    next model-made checkpoint lets the model untick what is no longer needed.
    """
    total = counter.count_messages(messages) if messages else 0
    cut = _older_part(messages, counter, max(1, total // 2), current_turn_start)
    oldest = _oldest_movable(messages, current_turn_start)
    if cut == 0 and oldest is not None:  # the oldest movable unit alone is over half: it still goes (U3)
        cut = oldest.stop
    plan = _split(messages, counter, cut, current_turn_start, "")
    moved = set(plan.moved_seqs)
    new_items = [
        cut_message(entry, counter, budgets.memo_per_message)
        for entry in sorted(moved_entries, key=lambda e: e.seq)
        if entry.is_user and entry.seq in moved
    ]
    previous = previous or Checkpoint(mind=EMPTY_MIND, memo=(), scene="")
    known = {item.seq for item in previous.memo}
    memo = (*previous.memo, *(item for item in new_items if item.seq not in known))
    checkpoint = Checkpoint(mind=previous.mind, memo=tuple(memo), scene=_scene_for(previous.scene, messages))
    reason = (
        f"model-free move-out (V7): {len(plan.moved)} oldest messages ({plan.freed_tokens} of {total} "
        f"tokens) moved out; previous mind and scene kept; {len(new_items)} user messages added to the memo"
    )
    return ModelFreeMoveOut(plan=replace(plan, reason=reason), checkpoint=checkpoint, reason=reason)


# ---- V8: the give-up rule ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointRunState:
    """Strikes against checkpointing in one run: failed checkpoints and ones that freed too little."""

    failures: int = 0
    too_little: int = 0

    @property
    def strikes(self) -> int:
        return self.failures + self.too_little


def may_try_checkpoint(state: CheckpointRunState) -> bool:
    """V8: after two strikes (failures and too-little checkpoints together) only V7 frees room."""
    return state.strikes < MAX_STRIKES


def needed_to_free(tokens: int, threshold: int, current_step: int = 0) -> int:
    """V8: what an accepted checkpoint must free for it not to count as too little - the request back
    under the threshold, plus MIN_ROOM_SHARE of the threshold as room for the work that follows; and
    what it keeps of its own (system prompt, tools, recollection, recent messages: all but the
    `current_step`, the step in progress and the current turn's messages that no checkpoint moves) at
    most LASTING_SHARE of the threshold, so that the next checkpoint is a good stretch of work away
    (at 90% the demo's 6,144-token window checkpointed every 2-4 model requests)."""
    room = max(tokens - threshold, 0) + int(threshold * MIN_ROOM_SHARE)
    return max(room, tokens - current_step - int(threshold * LASTING_SHARE))


def record_attempt(
    state: CheckpointRunState, freed_tokens: int, needed: int, *, failed: bool = False
) -> CheckpointRunState:
    """Count one checkpoint attempt.

    "Too little freed": an accepted checkpoint that freed fewer tokens than `needed` (`needed_to_free`:
    the request back under the trigger threshold, plus some room to work). Such a checkpoint leaves the
    next request at or near the threshold, so another one would follow at once.
    """
    if failed:
        return replace(state, failures=state.failures + 1)
    if freed_tokens < max(needed, 1):
        return replace(state, too_little=state.too_little + 1)
    return state


# ---- V9: an oversized tool output -------------------------------------------------------------------


def _cut_note(original: int, kept: int) -> str:
    return (
        f"\n[Avibe: this tool output was cut from {original} to about {kept} tokens to fit the context; the "
        "middle part is not shown. Re-run the tool with a narrower command to see it.]\n"
    )


def _short_cut_note(original: int, kept: int) -> str:
    return f"\n[Avibe: tool output cut, {original} tokens]\n"


def _with_chars(content: str, chars: int, note: str) -> str:
    head = chars * 2 // 3  # the start says what ran; the end usually holds the error or the result
    tail = chars - head
    return content[:head] + note + (content[-tail:] if tail else "")


def _most_chars(content: str, note: str, counter: TokenCounter, max_tokens: int) -> int:
    """The most characters of `content` that fit around `note` within `max_tokens` (binary search)."""
    lo, hi = 0, len(content)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(_with_chars(content, mid, note)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cut_tool_output(message: ChatMessage, counter: TokenCounter, max_tokens: int) -> ChatMessage:
    """V9: the message with its content cut to fit `max_tokens` (head and tail kept, a note saying it was
    cut in between). Returned unchanged when it already fits. With very little room the note is short;
    ValueError when not even the short note fits (the caller's room is wrong, not the data)."""
    original = counter.count(message.content)
    if original <= max_tokens:
        return message
    for make_note in (_cut_note, _short_cut_note):
        note = make_note(original, max_tokens)
        if counter.count(note) <= max_tokens:
            chars = _most_chars(message.content, note, counter, max_tokens)
            return replace(message, content=_with_chars(message.content, chars, note))
    raise ValueError(f"cannot cut a tool output to {max_tokens} tokens: even the cut note needs more")


MIN_OUTPUT_CAP: Final = 24  # tokens a cut output keeps at least: the short note and a few words


def output_caps(sizes: Sequence[int], budget: int) -> list[int]:
    """V9 for a step of many calls: the most tokens each output may keep so that together they fit
    `budget` - the outputs under a common cap stay whole, the larger ones are cut to it (the largest cap
    that fits; never under MIN_OUTPUT_CAP). Pure; sizes unchanged when they already fit."""
    if sum(sizes) <= budget:
        return list(sizes)
    low, high = 0, max(sizes, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(size, middle) for size in sizes) <= budget:
            low = middle
        else:
            high = middle - 1
    cap = max(low, MIN_OUTPUT_CAP)
    return [min(size, cap) for size in sizes]


def cut_step_outputs(
    outputs: Sequence[ChatMessage], counter: TokenCounter, budget: int
) -> tuple[ChatMessage, ...]:
    """The newest step's tool outputs cut (V9, each with its note) so that together they fit `budget`
    tokens of content: one agent step of 20 calls, each output a few hundred tokens, was larger than a
    small window, and a step is never split from its calls, so nothing could move out (U3)."""
    sizes = [counter.count(message.content) for message in outputs]
    caps = output_caps(sizes, budget)
    return tuple(
        message if cap >= size else cut_tool_output(message, counter, cap)
        for message, size, cap in zip(outputs, sizes, caps, strict=True)
    )


# ---- U3: nothing left to move out -------------------------------------------------------------------


def request_parts(
    messages: Sequence[ChatMessage],
    counter: TokenCounter,
    current_turn_start: int | None = None,
    *,
    system_prompt: int = 0,
    tool_list: int = 0,
    checkpoint: int = 0,
) -> dict[str, int]:
    """The parts of a request by name, for U3's message: the caller's own pieces (system prompt, tool
    list, checkpoint recollection - each counted by the caller) and the conversation split into the
    current request (pinned, F5), the latest step (the newest unit) and the older messages (movable)."""
    units = _units(messages)
    pinned = [messages[i] for u in units if _unit_pinned(messages, u, current_turn_start) for i in u]
    latest = [] if not units or _unit_pinned(messages, units[-1], current_turn_start) else list(units[-1])
    older = [messages[i] for unit in movable_units(messages, current_turn_start) for i in unit]
    return {
        "system prompt": system_prompt,
        "tool list": tool_list,
        "checkpoint": checkpoint,
        "current request": counter.count_messages(pinned) if pinned else 0,
        "latest step": counter.count_messages([messages[i] for i in latest]) if latest else 0,
        "older messages": counter.count_messages(older) if older else 0,
    }


@dataclass(frozen=True, slots=True)
class StopDecision:
    stop: bool
    reason: str
    message: str = ""  # what the user sees when `stop` (U3)


def too_long_to_continue(parts: Mapping[str, int], limit: int, movable_tokens: int) -> StopDecision:
    """U3: stop only when the request does not fit `limit` and nothing is left to move out.

    `parts` names what the request is made of and its tokens (e.g. "system prompt", "checkpoint",
    "current request", "latest tool output"); the message says which parts are the largest.
    """
    total = sum(parts.values())
    if total <= limit:
        return StopDecision(False, f"the request fits ({total} <= {limit} tokens)")
    if movable_tokens > 0:
        return StopDecision(
            False, f"over the limit ({total} > {limit}) but {movable_tokens} tokens can move out"
        )
    largest = sorted(parts.items(), key=lambda p: p[1], reverse=True)[:3]
    what = ", ".join(f"{name} ({tokens} tokens)" for name, tokens in largest if tokens > 0)
    reason = f"nothing left to move out and the request needs {total} tokens of {limit}"
    return StopDecision(True, reason, f"{U3_MESSAGE}\nToo large: {what} - {total} tokens, {limit} allowed.")
