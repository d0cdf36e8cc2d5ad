"""The shared replay loop and every baseline strategy, on the package's strict scripted model (F1, F4)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from avibe.errors import ScriptError
from avibe.evals.baselines import MASKED
from avibe.evals.generators import generate
from avibe.evals.metrics import measure
from avibe.evals.replay import replay
from avibe.evals.strategies import (
    BASELINES,
    CHECKPOINT,
    available_strategies,
    checkpoint_driver,
    make_strategy,
)
from avibe.evals.strategy import (
    REQUEST_KIND,
    SUMMARY_KIND,
    Compacted,
    CompactState,
    NotApplicable,
    StrategyUnavailable,
    summarise,
)
from avibe.ports import ModelClient, TokenCounter
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


def test_E1_the_checkpoint_slot_says_when_no_driver_is_wired(monkeypatch: pytest.MonkeyPatch) -> None:
    from avibe.evals import strategies

    monkeypatch.setattr(strategies, "DRIVER_MODULES", ("avibe.no_such_module",))
    assert CHECKPOINT not in available_strategies()
    with pytest.raises(StrategyUnavailable, match="not wired"):
        make_strategy(CHECKPOINT)


def test_E1_a_registered_driver_fills_the_checkpoint_slot(counter: TokenCounter) -> None:
    def keep_last_user(
        state: CompactState, model: ModelClient, counter: TokenCounter, window: int
    ) -> Compacted:
        users = [m for m in state.messages if m.kind == "user"][-1:]
        meta = {"first_pass_valid": True, "repaired": False, "fallback": None}
        return Compacted((state.messages[0], *users), 0, 0, carry="mind", meta=meta)

    with checkpoint_driver(keep_last_user):
        assert CHECKPOINT in available_strategies()
        scenario = generate("queue", 1, 30)
        result = replay(scenario, make_strategy(CHECKPOINT), ScriptedModel([]), counter, WINDOW)
    assert result.k >= 1 and result.compactions[0].meta["first_pass_valid"] is True
    assert measure(scenario, result.context, counter).values["context_tokens"] < WINDOW


def test_E1_unknown_strategy_names_fail_clearly() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        make_strategy("magic")
