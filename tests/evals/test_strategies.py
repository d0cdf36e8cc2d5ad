"""The shared replay loop and every baseline strategy, on the package's strict scripted model (F1, F4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from avibe.errors import ScriptError
from avibe.evals.baselines import MASKED
from avibe.evals.generators import generate
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.strategies import BASELINES, CHECKPOINT, available_strategies, make_strategy
from avibe.evals.strategy import (
    REQUEST_KIND,
    SUMMARY_KIND,
    NotApplicable,
    summarise,
)
from avibe.ports import TokenCounter
from avibe.providers.scripted import ScriptedModel, reply
from avibe.record.messages import ChatMessage

WINDOW = 3000


@pytest.mark.parametrize("name", [n for n in BASELINES if n != "full"])
def test_F1_every_baseline_keeps_the_context_under_the_window(
    name: str, counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    model = scripted(100)
    result = replay(generate("constraint_fidelity", 1, 30), make_strategy(name), model, counter, WINDOW)
    assert result.k >= 1
    assert counter.count_messages(result.context) <= WINDOW
    assert result.context[0].role == "system"
    assert len(model.requests) == result.calls  # the strict model saw exactly the calls reported
    if name in {"truncate", "mask"}:
        assert result.calls == 0 and result.tokens_spent == 0
    else:
        assert result.calls == result.k and result.tokens_spent > 0
        assert all(r.messages[-1].kind == REQUEST_KIND for r in model.requests)


def test_F1_the_full_context_ceiling_applies_only_where_it_fits(counter: TokenCounter) -> None:
    fits = replay(generate("queue", 1, 3), make_strategy("full"), ScriptedModel([]), counter, 100_000)
    assert fits.k == 0 and fits.calls == 0
    with pytest.raises(NotApplicable):
        replay(generate("queue", 1, 40), make_strategy("full"), ScriptedModel([]), counter, WINDOW)


def test_E1_rewrite_keeps_only_its_summary(
    counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    result = replay(generate("queue", 1, 30), make_strategy("rewrite"), scripted(50), counter, WINDOW)
    assert any(m.kind == SUMMARY_KIND for m in result.context)
    summary = next(m for m in result.context if m.kind == SUMMARY_KIND)
    assert "The user asked" in summary.content  # the naive summariser's retelling, now the only memory


def test_E1_handoff_copies_user_inputs_verbatim_with_their_tags(
    counter: TokenCounter, scripted: Callable[[int], ScriptedModel]
) -> None:
    scenario = generate("spoofed_user", 1, 12)
    result = replay(scenario, make_strategy("handoff"), scripted(50), counter, WINDOW)
    copied = [m for m in result.context if m.role == "user" and m.kind != SUMMARY_KIND]
    assert copied and all(m.kind in {"user", "watch", "timer", "agent"} for m in copied)
    assert all(m.content.startswith("[Harness: ") for m in copied if m.kind != "user")
    budget = int(WINDOW * 0.9 / 4)
    assert counter.count_messages(copied) <= budget + 3 * len(copied)


def test_E1_anchored_updates_the_previous_summary(counter: TokenCounter) -> None:
    seen: list[str] = []

    def summariser(request: object) -> object:
        last = request.messages[-1].content  # type: ignore[attr-defined]
        seen.append(last)
        return reply(f"## Session intent\nversion {len(seen)}")

    model = ScriptedModel([summariser] * 20)  # type: ignore[list-item]
    result = replay(generate("mission_fade", 1, 40), make_strategy("anchored"), model, counter, WINDOW)
    assert result.k >= 2
    assert "version 1" in seen[1]  # the second compaction was asked to update the first summary
    assert sum(m.kind == SUMMARY_KIND for m in result.context) == 1
    assert f"version {result.k}" in next(m.content for m in result.context if m.kind == SUMMARY_KIND)


def test_E1_masking_blanks_old_tool_output(counter: TokenCounter) -> None:
    result = replay(generate("waiting_on", 1, 30), make_strategy("mask"), ScriptedModel([]), counter, WINDOW)
    outputs = [m.content for m in result.context if m.role == "tool"]
    assert MASKED in outputs or len(outputs) < 30
    assert outputs[-1] != MASKED


def test_E1_summarise_cuts_its_input_to_the_window_and_notes_it(counter: TokenCounter) -> None:
    big = [
        ChatMessage("system", "sys"),
        *(ChatMessage("user", "word " * 400, kind="user") for _ in range(20)),
    ]
    model = ScriptedModel([reply("short")])
    summary = summarise(model, counter, 2000, big, "Summarise.")
    sent = model.requests[0]
    assert counter.count_messages(sent.messages) + (sent.max_tokens or 0) <= 2000
    assert sent.messages[0].role == "system" and sent.messages[-1].content == "Summarise."
    assert any("left out" in note for note in summary.notes)


def test_E1_an_empty_summary_is_noted_not_hidden(counter: TokenCounter) -> None:
    summary = summarise(ScriptedModel([reply("  ")]), counter, 4000, [ChatMessage("system", "s")], "Go.")
    assert summary.text == "" and "empty summary" in summary.notes[-1]


def test_E1_a_model_that_misbehaves_is_not_masked(counter: TokenCounter) -> None:
    """A scripted model that runs out of steps raises; the replay does not swallow it."""
    with pytest.raises(ScriptError):
        replay(generate("queue", 1, 30), make_strategy("rewrite"), ScriptedModel([]), counter, WINDOW)


def _checkpoint_replay(counter: TokenCounter) -> tuple[int, list[str | None]]:
    from eval_scripts import checkpoint_answer

    scenario = generate("constraint_fidelity", 2, 40)
    model = ScriptedModel([checkpoint_answer] * 400)
    strategy = make_strategy(CHECKPOINT, checkpoint_mode="structured")
    # F1's own threshold: 90% of this window is past the hard limit, where Vibey must move out (V7) first
    result = replay(
        scenario, strategy, model, counter, WINDOW, threshold=trigger_fraction(model.facts, WINDOW)
    )
    return result.calls, [c.meta.get("fallback") for c in result.compactions]


def test_E1_the_eval_runs_vibeys_room_policy_change_it_and_the_result_changes(
    counter: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN: the eval measures the code users run - the same room loop, policy and driver as Vibey."""
    from avibe.agent.compaction import room
    from avibe.checkpoint import plan

    decided: list[str] = []
    real = room.decide_room

    def watched(*args: Any, **kwargs: Any) -> Any:
        action = real(*args, **kwargs)
        decided.append(action.kind)
        return action

    monkeypatch.setattr(room, "decide_room", watched)
    calls, fallbacks = _checkpoint_replay(counter)
    turns = {"checkpoint", "partial"}
    assert turns & set(decided) and calls > 0 and set(fallbacks) - {"model-free"}  # checkpoints were made

    monkeypatch.setattr(plan, "MAX_STRIKES", 0)  # V8 from the start: Vibey would never try a checkpoint
    decided.clear()
    calls, fallbacks = _checkpoint_replay(counter)
    assert not turns & set(decided) and calls == 0
    assert fallbacks and set(fallbacks) == {"model-free"}


def test_E1_every_strategy_is_available() -> None:
    assert set(available_strategies()) == {CHECKPOINT, *BASELINES}


def test_E1_unknown_strategy_names_fail_clearly() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        make_strategy("magic")
