"""Plans and fallbacks (V5-V9, U3, F5): what moves out, partial plans, the model-free move-out, give-up."""

from __future__ import annotations

from collections.abc import Sequence

from core_doubles import CharCounter, make_entry
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.memo import cut_note, memo_text_matches
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.plan import (
    MIN_OUTPUT_CAP,
    U3_MESSAGE,
    CheckpointRunState,
    MovePlan,
    cut_step_outputs,
    cut_tool_output,
    may_try_checkpoint,
    model_free_move_out,
    movable_tokens,
    movable_units,
    output_caps,
    partial_plan,
    plan_move_out,
    record_attempt,
    request_parts,
    too_long_to_continue,
)
from avibe.record.messages import ChatMessage, ToolCall

COUNTER = CharCounter()


# ---- conversations ----------------------------------------------------------------------------------


def user(seq: int, text: str, kind: str = "user") -> ChatMessage:
    return ChatMessage(role="user", content=text, seq=seq, kind=kind)


def said(seq: int, text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, seq=seq, kind="assistant")


def tool_group(seq: int, call_id: str, outputs: Sequence[str]) -> list[ChatMessage]:
    calls = tuple(ToolCall(f"{call_id}-{i}", "shell", {"command": "ls"}) for i in range(len(outputs)))
    group = [ChatMessage(role="assistant", content="", tool_calls=calls, seq=seq, kind="assistant")]
    group += [
        ChatMessage(role="tool", content=out, tool_call_id=c.id)
        for c, out in zip(calls, outputs, strict=True)
    ]
    return group


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Users (and non-user inputs), replies, and tool-call groups in any order."""
    messages: list[ChatMessage] = []
    text = st.text(alphabet="abc xyz", min_size=0, max_size=120)
    for seq in range(1, draw(st.integers(0, 25)) + 1):
        shape = draw(st.sampled_from(["user", "callback", "reply", "tools"]))
        if shape in ("user", "callback"):
            messages.append(user(seq, draw(text), kind=shape))
        elif shape == "reply":
            messages.append(said(seq, draw(text)))
        else:
            messages += tool_group(seq, f"c{seq}", draw(st.lists(text, min_size=1, max_size=3)))
    return messages


def _assert_units_whole(plan: MovePlan, messages: Sequence[ChatMessage]) -> None:
    """No tool call is separated from its results, and every message is either moved or kept, once."""
    moved_ids = {id(m) for m in plan.moved}
    for i, message in enumerate(messages):
        if message.role == "tool":
            owner = max(j for j in range(i) if messages[j].role == "assistant" and messages[j].tool_calls)
            assert (id(messages[owner]) in moved_ids) == (id(message) in moved_ids)
    assert sorted(map(id, [*plan.moved, *plan.kept])) == sorted(map(id, messages))
    order = {id(m): i for i, m in enumerate(messages)}
    assert [order[id(m)] for m in plan.moved] == sorted(order[id(m)] for m in plan.moved)
    assert [order[id(m)] for m in plan.kept] == sorted(order[id(m)] for m in plan.kept)


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(0, 400), st.data())
def test_V6_F5_no_plan_splits_a_tool_call_from_its_results(
    messages: list[ChatMessage], budget: int, data: st.DataObject
) -> None:
    turn_start = data.draw(st.none() | st.integers(0, max(0, len(messages))))
    plans = [plan_move_out(messages, COUNTER, budget, turn_start)]
    plans += [partial_plan(messages, COUNTER, budget * 4, attempt, turn_start) for attempt in (1, 2)]
    if messages:
        previous = Checkpoint("mind", (), "scene")
        plans.append(
            model_free_move_out(messages, COUNTER, previous, (), budgets_for(8_000, 7_000), turn_start).plan
        )
    for plan in plans:
        if plan is None:
            continue
        _assert_units_whole(plan, messages)
        if turn_start is not None:  # F5: the current turn's user messages stay verbatim
            pinned = [m for m in messages[turn_start:] if m.kind == "user"]
            assert all(any(m is k for k in plan.kept) for m in pinned)


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(0, 400))
def test_F4_kept_messages_fit_the_recent_budget_unless_one_unit_is_alone(
    messages: list[ChatMessage], budget: int
) -> None:
    plan = plan_move_out(messages, COUNTER, budget)
    if plan.kept and COUNTER.count_messages(plan.kept) > budget:  # only the newest unit may pass the budget
        last = len(messages) - 1
        while messages[last].role == "tool":
            last -= 1
        assert list(plan.kept) == messages[last:]
    assert plan.freed_tokens == (COUNTER.count_messages(plan.moved) if plan.moved else 0)
    assert plan.moved_seqs == tuple(m.seq for m in plan.moved if m.seq is not None)


def test_F4_moves_oldest_first_and_keeps_the_newest() -> None:
    messages = [user(1, "a" * 400), said(2, "b" * 400), user(3, "c" * 40), said(4, "d" * 40)]
    plan = plan_move_out(messages, COUNTER, recent_budget=60)
    assert plan.moved == tuple(messages[:2]) and plan.kept == tuple(messages[2:])
    assert plan.upto_seq == 2 and "move out 2 oldest" in plan.reason


def test_F4_nothing_to_move_when_everything_fits() -> None:
    plan = plan_move_out([user(1, "hi")], COUNTER, recent_budget=1_000)
    assert plan.is_empty and "nothing to move out" in plan.reason


def test_F5_current_turn_user_messages_stay_even_when_old() -> None:
    messages = [
        user(1, "old"),
        user(2, "the task: fix the parser " * 10),
        *tool_group(3, "t", ["x" * 800]),
        said(4, "ok"),
    ]
    plan = plan_move_out(messages, COUNTER, recent_budget=20, current_turn_start=1)
    assert messages[1] in plan.kept and messages[0] in plan.moved
    assert plan.kept[0] is messages[1]


def test_F5_non_user_input_of_the_current_turn_is_not_pinned() -> None:
    messages = [
        user(1, "do it"),
        user(2, "ci failed " * 30, kind="callback"),
        said(3, "x" * 400),
        said(4, "y"),
    ]
    plan = plan_move_out(messages, COUNTER, recent_budget=5, current_turn_start=0)
    assert messages[0] in plan.kept and messages[1] in plan.moved


def test_V6_partial_plan_takes_at_most_half_then_a_quarter_and_two_tries() -> None:
    messages = [user(i, "w" * 100) if i % 2 else said(i, "r" * 100) for i in range(1, 21)]
    total = COUNTER.count_messages(messages)
    first = partial_plan(messages, COUNTER, room=10_000, attempt=1)
    second = partial_plan(messages, COUNTER, room=10_000, attempt=2)
    assert first is not None and second is not None
    assert first.freed_tokens <= total // 2 and second.freed_tokens <= total // 4
    assert first.freed_tokens > second.freed_tokens > 0
    assert "try 1 of 2" in first.reason and "try 2 of 2" in second.reason
    assert partial_plan(messages, COUNTER, room=10_000, attempt=3) is None
    limited = partial_plan(messages, COUNTER, room=60, attempt=1)
    assert limited is not None and limited.freed_tokens <= 60
    assert partial_plan(messages, COUNTER, room=5, attempt=1) is None  # not one unit fits: V7 instead


# ---- V7: model-free move-out ------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=600)
kinds = st.sampled_from(["user", "user", "callback", "watch", "agent", "timer", "harness"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(kinds, texts), min_size=1, max_size=20), st.sampled_from([8_000, 32_000, 200_000]))
def test_V7_N7_model_free_move_out_keeps_every_moved_user_message_and_the_previous_mind(
    inputs: list[tuple[str, str]], window: int
) -> None:
    entries = [make_entry(seq, text, kind=kind) for seq, (kind, text) in enumerate(inputs, start=1)]  # type: ignore[arg-type]
    messages = [user(e.seq, e.text, kind=e.kind) for e in entries]
    previous = Checkpoint("## I am here\nmind", (MemoItem(99, "older words"),), "<checkpoint>s</checkpoint>")
    budgets = budgets_for(window, int(window * 0.9))
    result = model_free_move_out(messages, COUNTER, previous, entries, budgets)
    memo = {item.seq: item for item in result.checkpoint.memo}
    assert result.checkpoint.mind == previous.mind and result.checkpoint.scene == previous.scene
    assert memo[99] == previous.memo[0]
    moved = set(result.plan.moved_seqs)
    if len(messages) > 1:
        assert moved
    for entry in entries:
        if entry.seq in moved and entry.is_user:
            item = memo[entry.seq]
            assert memo_text_matches(item, entry.text)
            assert COUNTER.count(item.text) <= budgets.memo_per_message
            assert not item.cut or item.text.endswith(cut_note(entry.seq))
        elif entry.seq != 99:
            assert entry.seq not in memo  # N7: no non-user entry, no kept message, enters the memo
    assert "model-free" in result.reason


def test_V7_moves_about_the_oldest_half() -> None:
    entries = [make_entry(i, f"message {i} " * 20) for i in range(1, 11)]
    messages = [user(e.seq, e.text) for e in entries]
    result = model_free_move_out(
        messages, COUNTER, Checkpoint("m", (), "s"), entries, budgets_for(32_000, 28_000)
    )
    assert result.plan.moved_seqs == (1, 2, 3, 4, 5)
    assert [i.seq for i in result.checkpoint.memo] == [1, 2, 3, 4, 5]


# ---- V8: give-up rule -------------------------------------------------------------------------------


def test_V8_two_failures_end_checkpointing_for_the_run() -> None:
    state = CheckpointRunState()
    assert may_try_checkpoint(state)
    state = record_attempt(state, 0, 5_000, failed=True)
    assert may_try_checkpoint(state)
    state = record_attempt(state, 0, 5_000, failed=True)
    assert not may_try_checkpoint(state) and state.failures == 2


def test_V8_checkpoints_that_free_too_little_count_as_strikes() -> None:
    state = record_attempt(CheckpointRunState(), freed_tokens=9_000, needed=5_000)
    assert state == CheckpointRunState()
    state = record_attempt(state, freed_tokens=1_000, needed=5_000)
    state = record_attempt(state, freed_tokens=4_999, needed=5_000, failed=True)
    assert (state.failures, state.too_little) == (1, 1) and not may_try_checkpoint(state)


# ---- V9, U3 -----------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=3_000), st.integers(1, 40) | st.integers(1, 800))
def test_V9_oversized_tool_output_is_cut_with_a_note(content: str, limit: int) -> None:
    message = ChatMessage(role="tool", content=content, tool_call_id="c1", name="shell")
    if COUNTER.count(content) <= limit:
        assert cut_tool_output(message, COUNTER, limit) is message
        return
    try:
        cut = cut_tool_output(message, COUNTER, limit)
    except ValueError as error:  # not even the short note fits: a clear error, never an over-budget message
        assert limit < 12 and "cannot cut a tool output" in str(error)
        return
    assert COUNTER.count(cut.content) <= limit
    assert "[Avibe: " in cut.content and "cut" in cut.content
    assert cut.tool_call_id == "c1" and cut.role == "tool"
    head = cut.content.split("\n[Avibe: ", 1)[0]
    assert content.startswith(head)
    if limit >= 60:
        assert "this tool output was cut" in cut.content


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3_000), min_size=1, max_size=25), st.integers(0, 20_000))
def test_V9_a_steps_outputs_share_the_room_the_largest_cut_first(sizes: list[int], budget: int) -> None:
    caps = output_caps(sizes, budget)
    assert all(0 <= cap <= size for cap, size in zip(caps, sizes, strict=True))
    if sum(sizes) <= budget:
        assert caps == sizes
        return
    cut = {cap for cap, size in zip(caps, sizes, strict=True) if cap < size}
    assert len(cut) <= 1  # one common cap; every output under it stays whole
    cap = next(iter(cut), MIN_OUTPUT_CAP)  # nothing cut: every output is under the floor
    assert cap >= MIN_OUTPUT_CAP and all(c == s for c, s in zip(caps, sizes, strict=True) if s <= cap)
    if sum(caps) > budget:
        assert cap == MIN_OUTPUT_CAP  # only the floor keeps more than the room
    else:
        assert budget < sum(min(size, cap + 1) for size in sizes)  # the largest cap that fits


def test_V9_a_step_of_twenty_outputs_is_cut_to_fit_together_each_with_its_note() -> None:
    outputs = [
        ChatMessage(role="tool", content=f"line of output {n}\n" * (40 + 10 * n), tool_call_id=f"c{n}")
        for n in range(20)
    ]
    small = ChatMessage(role="tool", content="ok", tool_call_id="c20")
    total = sum(COUNTER.count(m.content) for m in outputs)
    cut = cut_step_outputs([*outputs, small], COUNTER, total // 3)
    assert sum(COUNTER.count(m.content) for m in cut) <= total // 3
    noted = [n for n, m in enumerate(cut[:-1]) if "[Avibe: " in m.content]
    assert cut[-1] is small and noted == list(range(noted[0], 20))  # the largest ones, each with a note
    assert all(cut[n] is outputs[n] for n in range(noted[0]))
    assert [m.tool_call_id for m in cut] == [*(m.tool_call_id for m in outputs), "c20"]
    assert cut_step_outputs(outputs, COUNTER, total) == tuple(outputs)


def test_U3_stops_only_when_nothing_is_left_to_move_out() -> None:
    parts = {"system prompt": 3_000, "checkpoint": 2_000, "latest tool output": 9_000}
    assert not too_long_to_continue(parts, limit=20_000, movable_tokens=0).stop
    assert not too_long_to_continue(parts, limit=10_000, movable_tokens=500).stop
    decision = too_long_to_continue(parts, limit=10_000, movable_tokens=0)
    assert decision.stop
    assert decision.message.startswith(U3_MESSAGE)
    assert "latest tool output (9000 tokens)" in decision.message and "14000 tokens" in decision.message
    assert "nothing left to move out" in decision.reason


# ---- U3: pinned messages never make the cut empty ----------------------------------------


def _two_reads_turn() -> list[ChatMessage]:
    """One turn with two big reads: the user's message, a 4,800-token file read, a 2,500-token read
    (CharCounter: four characters a token, four tokens a message)."""
    return [
        user(1, "Summarise both files."),
        *tool_group(2, "r1", ["x" * (4 * 4_792)]),
        *tool_group(3, "r2", ["y" * (4 * 2_492)]),
    ]


def test_U3_F5_a_pinned_user_message_does_not_make_the_cut_empty() -> None:
    messages = _two_reads_turn()
    big_read = messages[1:3]
    total = COUNTER.count_messages(messages)
    assert 7_300 < total < 7_400
    # V6: the big read alone is over half the conversation, but it fits the checkpoint turn: it goes alone
    part = partial_plan(messages, COUNTER, room=5_000, attempt=1, current_turn_start=0)
    assert part is not None and part.moved == tuple(big_read)
    assert part.kept == (messages[0], *messages[3:]) and part.freed_tokens >= 4_800
    assert partial_plan(messages, COUNTER, room=5_000, attempt=2, current_turn_start=0) is None
    assert partial_plan(messages, COUNTER, room=4_000, attempt=1, current_turn_start=0) is None  # V7 then
    # V7: the model-free move-out moves the big read out around the pinned request
    previous = Checkpoint("mind", (), "scene")
    result = model_free_move_out(messages, COUNTER, previous, (), budgets_for(8_000, 7_000), 0)
    assert result.plan.moved == tuple(big_read)
    assert messages[0] in result.plan.kept
    assert COUNTER.count_messages(result.plan.kept) < 2_600  # what is left fits a 7,000-token limit
    left = [*result.plan.kept]
    assert model_free_move_out(left, COUNTER, previous, (), budgets_for(8_000, 7_000), 0).plan.is_empty
    assert movable_units(left, 0) == [] and movable_tokens(left, COUNTER, 0) == 0


def test_U3_F5_units_move_out_around_pinned_messages_anywhere_in_the_turn() -> None:
    messages = [
        user(1, "old request " * 40),
        user(2, "Now fix the parser."),
        *tool_group(3, "a", ["a" * 2_000]),
        user(4, "Also keep the old API."),
        *tool_group(5, "b", ["b" * 2_000]),
        *tool_group(6, "c", ["c" * 400]),
    ]
    assert [list(u) for u in movable_units(messages, 1)] == [[0], [2, 3], [5, 6]]
    plan = plan_move_out(messages, COUNTER, recent_budget=200, current_turn_start=1)
    assert plan.moved == (messages[0], *messages[2:4], *messages[5:7])
    assert plan.kept == (messages[1], messages[4], *messages[7:])
    only_pinned = [user(1, "Fix it."), user(2, "Quickly."), *tool_group(3, "a", ["a" * 4_000])]
    empty = plan_move_out(only_pinned, COUNTER, recent_budget=10, current_turn_start=0)
    assert empty.is_empty and "current request" in empty.reason


def test_U3_request_parts_name_every_part_of_the_request() -> None:
    messages = _two_reads_turn()
    parts = request_parts(messages, COUNTER, 0, system_prompt=900, tool_list=974, checkpoint=300)
    assert parts["tool list"] == 974 and parts["checkpoint"] == 300 and parts["system prompt"] == 900
    assert parts["current request"] == COUNTER.count_messages(messages[:1])
    assert (
        parts["older messages"]
        == COUNTER.count_messages(messages[1:3])
        == movable_tokens(messages, COUNTER, 0)
    )
    assert parts["latest step"] == COUNTER.count_messages(messages[3:])
    assert sum(parts.values()) == 900 + 974 + 300 + COUNTER.count_messages(messages)
    decision = too_long_to_continue(parts, 7_000, movable_tokens(messages, COUNTER, 0))
    assert not decision.stop and "can move out" in decision.reason  # the old planner stopped here
    left = [messages[0], *messages[3:]]
    stuck = request_parts(left, COUNTER, 0, system_prompt=900, tool_list=974, checkpoint=300)
    final = too_long_to_continue(stuck, 3_000, movable_tokens(left, COUNTER, 0))
    assert final.stop and "latest step (2500 tokens)" in final.message
    assert "tool list (974 tokens)" in final.message and "checkpoint (" not in final.message


@settings(max_examples=300, deadline=None)
@given(conversations(), st.data())
def test_U3_whenever_nothing_can_move_out_only_the_current_request_is_left(
    messages: list[ChatMessage], data: st.DataObject
) -> None:
    """Property: when the planner says nothing can move out, every unit left other than the
    newest step is pinned (the current turn's user messages, F5); and when anything else is left, the
    model-free move-out (V7) and the first partial try (V6) move some of it out."""
    turn_start = data.draw(st.none() | st.integers(0, max(0, len(messages))))
    units, movable = _all_units(messages), movable_units(messages, turn_start)
    previous = Checkpoint("mind", (), "scene")
    budgets = budgets_for(8_000, 7_000)
    v7 = model_free_move_out(messages, COUNTER, previous, (), budgets, turn_start).plan
    v6 = partial_plan(messages, COUNTER, COUNTER.count_messages(messages) + 1, 1, turn_start)
    if v7.is_empty:
        for unit in units[:-1]:
            assert any(messages[i].kind == "user" and i >= (turn_start or 0) for i in unit), unit
        assert turn_start is not None or len(units) <= 1
        assert not movable and v6 is None
        assert movable_tokens(messages, COUNTER, turn_start) == 0
    else:
        assert movable and v6 is not None and not v6.is_empty
        moved = {id(m) for m in v7.moved}
        assert all(id(messages[i]) in moved for i in movable[0])  # the oldest movable unit goes first
        assert not any(id(messages[i]) in moved for i in units[-1])  # the newest step stays


def _all_units(messages: Sequence[ChatMessage]) -> list[range]:
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
