"""The scenario types where the strategies really differ: a talkative user whose early
rules fall out of a newest-first copy of the user's messages, an authorisation revoked long ago, and a user
correcting a number. Deterministic per seed, ground truth consistent with the conversation."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from eval_scripts import checkpoint_answer, respond

from avibe.evals.generators import CHATTER, CHATTER_REPLIES, SCENARIO_TYPES, generate
from avibe.evals.metrics import measure
from avibe.evals.replay import replay, size_for_k, trigger_fraction
from avibe.evals.scenario import AssistantTurn, UserMessage, scenario_from_dict, scenario_to_dict
from avibe.evals.strategies import make_strategy
from avibe.evals.strategy import recent_budget
from avibe.ports import TokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ModelFacts, ModelReply

RULE = re.compile(r"^#(\d+)(?: \(kept\))?: (Never|Ask me|Our goal) ")
NEW = ("talkative_user", "revoked_long_ago", "self_correction")
WINDOW, THRESHOLD = 4096, 0.5


def _ticks_rules(request: ModelRequest) -> ModelReply:
    """Keeps the messages that state a rule or the goal; every other question answered correctly."""
    props: dict[str, Any] = request.json_schema["properties"] if request.json_schema else {}
    if "keep" not in props:
        return checkpoint_answer(request)
    lines = request.messages[-1].content.splitlines()
    return reply(json.dumps({"keep": [int(m.group(1)) for line in lines if (m := RULE.match(line))]}))


def _user_texts(kind: str, seed: int, size: int) -> list[str]:
    return [e.text for e in generate(kind, seed, size).events if isinstance(e, UserMessage)]


@pytest.mark.parametrize("kind", NEW)
def test_E1_new_types_are_registered_deterministic_and_grounded(kind: str) -> None:
    assert kind in SCENARIO_TYPES
    for seed in (1, 2, 7):
        scenario = generate(kind, seed, 9)
        assert generate(kind, seed, 9) == scenario
        assert scenario_from_dict(scenario_to_dict(scenario)) == scenario  # truth occurs verbatim
        assert scenario.truth.mission and scenario.truth.items and scenario.truth.probes
    assert generate(kind, 1, 9) != generate(kind, 2, 9)


def test_F4_talkative_user_rules_come_first_then_more_short_messages_than_the_handoff_copies(
    counter: TokenCounter,
) -> None:
    scenario = generate("talkative_user", 3, 4)
    texts = _user_texts("talkative_user", 3, 4)
    mission, *rules = (scenario.truth.mission, *(i.text for i in scenario.truth.items))
    assert texts[:3] == [mission, *rules]
    later = texts[3:]
    assert len(later) >= 40 and max(counter.count(t) for t in later) < 30
    # the messages after the rules alone overflow the handoff's recent budget at the eval's small window
    assert sum(counter.count(t) + 4 for t in later) > recent_budget(WINDOW, THRESHOLD)
    assert not any(rule.split(";")[0] in t for t in later for rule in rules)


def test_P3_talkative_user_early_rules_fall_out_of_the_handoff_but_stay_in_the_checkpoint(
    counter: TokenCounter,
) -> None:
    threshold = trigger_fraction(ModelFacts("scripted", WINDOW, 1024), WINDOW)
    size = size_for_k(lambda n: generate("talkative_user", 1, n), 1, WINDOW, counter, threshold=threshold)
    scenario = generate("talkative_user", 1, size)
    handoff = replay(scenario, make_strategy("handoff"), ScriptedModel([respond] * 50), counter, WINDOW,
                     threshold=threshold)  # fmt: skip
    assert handoff.k >= 1
    assert measure(scenario, handoff.context, counter).counts["items_exact"][0] < 2
    ours = replay(scenario, make_strategy("avibe-checkpoint", checkpoint_mode="structured"),
                  ScriptedModel([_ticks_rules] * 200), counter, WINDOW, threshold=threshold)  # fmt: skip
    assert ours.k >= 1
    assert measure(scenario, ours.context, counter).counts["items_exact"] == (2, 2)


def test_P3_revoked_long_ago_grants_revokes_then_many_messages() -> None:
    scenario = generate("revoked_long_ago", 4, 12)
    grant, revoke = scenario.truth.items
    assert grant.status == "revoked" and grant.replaced_by == "revoke" and revoke.status == "active"
    texts = _user_texts("revoked_long_ago", 4, 12)
    assert texts.index(grant.text) < texts.index(revoke.text)
    assert len(texts) - texts.index(revoke.text) - 1 >= 30  # many messages after the revocation
    [probe] = [p for p in scenario.truth.probes if p.kind == "exact"]
    assert probe.answer == "no"


@pytest.mark.parametrize("kind", ("talkative_user", "revoked_long_ago"))
def test_E1_chatter_is_answered_in_varied_words_about_each_message(kind: str) -> None:
    """One reply to every chatter message ("Sure.") was copied by small models into the probes' answers."""
    events = generate(kind, 2, 6).events
    answered = [
        (filled, answer.text)
        for said, answer in itertools.pairwise(events)
        if isinstance(said, UserMessage) and isinstance(answer, AssistantTurn)
        if (filled := _fill(CHATTER, said.text)) is not None
    ]
    assert len(answered) >= 30
    assert len({answer for _, answer in answered}) >= 8
    for (at, names), answer in answered:  # each answer is the one for its message, naming what it names
        reply = CHATTER_REPLIES[at]
        assert _fill((reply,), answer) == (0, {k: names[k] for k in _slots(reply)})


def _slots(template: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", template)


def _fill(templates: tuple[str, ...], text: str) -> tuple[int, dict[str, str]] | None:
    """Which template `text` fills, and with what; None when it fills none."""
    for at, template in enumerate(templates):
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[\\w./]+)", re.escape(template))
        if match := re.fullmatch(pattern, text):
            return at, match.groupdict()
    return None


def test_P3_self_correction_corrects_the_number_and_the_probe_wants_the_new_one() -> None:
    for seed in range(6):
        scenario = generate("self_correction", seed, 6)
        first, second = scenario.truth.items
        assert first.status == "superseded" and first.replaced_by == "second"
        old = int(first.text.rstrip(".").split()[-1])  # "Set the ... to OLD."
        numbers = [int(w.strip(".,")) for w in second.text.split() if w.strip(".,").isdigit()]
        new = numbers[0]
        assert new != old and old in numbers  # "must be NEW, not OLD"
        [value] = [p for p in scenario.truth.probes if p.id == "value"]
        assert value.answer == str(new)
