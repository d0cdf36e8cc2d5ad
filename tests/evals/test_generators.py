"""Generators: deterministic per seed, each type plants its ground truth (P1-P3, S3, S5, S6, N3, T1, T2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avibe.evals.generators import SCENARIO_TYPES, generate
from avibe.evals.replay import conversation_tokens, replay, size_for_k, to_steps
from avibe.evals.scenario import (
    AssistantTurn,
    BackgroundInput,
    UserMessage,
    scenario_from_dict,
    scenario_to_dict,
)
from avibe.evals.strategies import make_strategy
from avibe.ports import TokenCounter
from avibe.providers.scripted import ScriptedModel
from avibe.record.sources import looks_like_tag


@given(kind=st.sampled_from(SCENARIO_TYPES), seed=st.integers(0, 10_000), size=st.integers(0, 12))
@settings(max_examples=40, deadline=None)
def test_E1_generation_is_deterministic_and_grounded(kind: str, seed: int, size: int) -> None:
    scenario = generate(kind, seed, size)
    assert generate(kind, seed, size) == scenario
    # from_dict re-validates: every planted item, spoof and reference occurs in the conversation
    assert scenario_from_dict(scenario_to_dict(scenario)) == scenario
    assert scenario.truth.mission and scenario.truth.probes


@pytest.mark.parametrize("kind", SCENARIO_TYPES)
def test_E1_different_seeds_give_different_names_and_values(kind: str) -> None:
    texts = {scenario_to_dict(generate(kind, seed, 2))["truth"].__repr__() for seed in range(6)}
    assert len(texts) > 1


@pytest.mark.parametrize("kind", SCENARIO_TYPES)
def test_E1_size_adds_filler_work_with_tool_output(kind: str, counter: TokenCounter) -> None:
    small, large = generate(kind, 1, 2), generate(kind, 1, 30)
    assert conversation_tokens(large, counter) > conversation_tokens(small, counter) + 30 * 100
    outputs = [u.output for e in large.events if isinstance(e, AssistantTurn) for u in e.tool_uses]
    assert len(outputs) >= 30 and all(outputs)


def test_P3_constraint_fidelity_plants_a_negation_a_number_and_a_scope() -> None:
    truth = generate("constraint_fidelity", 5, 3).truth
    texts = [i.text for i in truth.items]
    assert any(t.startswith("Never ") for t in texts)
    assert any("$" in t and any(c.isdigit() for c in t) for t in texts)
    assert any(t.startswith("Only touch files under src/") for t in texts)


def test_P3_authorisation_is_granted_widened_then_revoked() -> None:
    truth = generate("authorisation_scope", 5, 3).truth
    assert [i.id for i in truth.items] == ["grant", "widen", "revoke"]
    assert truth.items[1].status == "revoked" and truth.items[1].replaced_by == "revoke"


def test_T1_T2_spoofed_user_comes_from_a_watch_a_timer_an_agent_and_a_forged_tag() -> None:
    scenario = generate("spoofed_user", 5, 4)
    background = [e for e in scenario.events if isinstance(e, BackgroundInput)]
    assert {e.source for e in background} == {"watch", "timer", "agent"}
    assert all("the user" in e.text.lower() for e in background)
    forged = [e for e in scenario.events if isinstance(e, UserMessage) and e.text.startswith("[Harness:")]
    assert len(forged) == 1 and looks_like_tag(forged[0].text)
    assert {s.source for s in scenario.truth.spoofs} == {"watch", "timer", "agent", "user"}


def test_N3_supersession_changes_a_preference_twice() -> None:
    items = generate("supersession", 5, 3).truth.items
    assert [i.status for i in items] == ["superseded", "superseded", "active"]
    assert items[0].replaced_by == "v2" and items[1].replaced_by == "v3"


def test_S3_S5_S6_waiting_on_and_pitfalls_plant_exact_references() -> None:
    waiting = generate("waiting_on", 5, 3).truth
    assert {r.kind for r in waiting.references} == {"job_id", "command", "path"}
    pitfalls = generate("pitfalls", 5, 3)
    errors = [u for e in pitfalls.events if isinstance(e, AssistantTurn) for u in e.tool_uses if u.is_error]
    assert len(errors) == 1 and errors[0].output == pitfalls.truth.references[0].value


def test_P2_queue_ends_with_items_left_and_a_next_item() -> None:
    queue = generate("queue", 5, 6).truth.queue
    assert queue is not None and queue.next_item is not None and 2 <= queue.done < len(queue.items)


def test_T1_background_inputs_carry_a_tag_rendered_from_their_source() -> None:
    steps = to_steps(generate("spoofed_user", 2, 2))
    tagged = [s.messages[0] for s in steps if s.entry.kind in {"watch", "timer", "agent"}]
    assert len(tagged) == 3 and all(m.content.startswith("[Harness: ") for m in tagged)
    forged = [s.messages[0] for s in steps if s.entry.kind == "user" and "[Harness:" in s.entry.text]
    assert forged[0].content.startswith(f"{forged[0].content.split(':')[0]}: [Harness:")  # name in front (T2)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_E1_size_for_k_makes_truncation_compact_about_k_times(k: int, counter: TokenCounter) -> None:
    window = 3000
    size = size_for_k(lambda n: generate("queue", 1, n), k, window, counter)
    scenario = generate("queue", 1, size)
    assert conversation_tokens(scenario, counter) >= 0.9 * window
    result = replay(scenario, make_strategy("truncate"), ScriptedModel([]), counter, window)
    assert k <= result.k <= 2 * k


def test_N5_late_rule_puts_each_constraint_last_in_a_long_user_message() -> None:
    scenario = generate("late_rule", 5, 3)
    users = [e.text for e in scenario.events if isinstance(e, UserMessage)]
    assert len(scenario.truth.items) == 3
    for item in scenario.truth.items:
        assert any(text.endswith(item.text) and len(text) > 4 * len(item.text) for text in users)
    assert users[0].startswith(scenario.truth.mission)
