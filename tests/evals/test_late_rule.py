"""The late_rule scenario (N5, L3, P3): constraints that are the last sentences of long
user messages. The checkpoint keeps them byte-identical - the model ticks the sentence, or the harness
keeps the rule-worded sentences it leaves out, copied from the record - while the rewrite strategy,
retelling each message in a line, does not."""

from __future__ import annotations

import json
import re
from typing import Any

from eval_scripts import checkpoint_answer, respond

from avibe.evals.generators import generate
from avibe.evals.metrics import measure
from avibe.evals.replay import replay, trigger_fraction
from avibe.evals.strategies import CHECKPOINT, make_strategy
from avibe.ports import TokenCounter
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ModelFacts, ModelReply

WINDOW = 4000
THRESHOLD = trigger_fraction(ModelFacts("scripted", WINDOW, 1024), WINDOW)
RULE_START = re.compile(r"^#(\d+(?:\.\d+)?)(?: \(kept\))?: (Never|Do not|Only|Our goal) ")


def _ticks_rules(request: ModelRequest) -> ModelReply:
    """A model that reads the memo question and keeps what states a rule (sentence lines included) and
    the message that sets the goal; every other question is answered like eval_scripts does."""
    props: dict[str, Any] = request.json_schema["properties"] if request.json_schema else {}
    if "keep" not in props:
        return checkpoint_answer(request)
    enum = props["keep"]["items"]["enum"]
    chosen = []
    for line in request.messages[-1].content.splitlines():
        match = RULE_START.match(line)
        if match:
            label = match.group(1)
            chosen.append(int(label) if label.isdigit() else label)
    return reply(json.dumps({"keep": [label for label in chosen if label in enum]}))


def test_N5_late_rule_plants_each_constraint_at_the_end_of_a_long_message(counter: TokenCounter) -> None:
    scenario = generate("late_rule", 3, 6)
    texts = [e.text for e in scenario.events if getattr(e, "author", None) == scenario.user]
    for item in scenario.truth.items:
        [message] = [t for t in texts if item.text in t]
        assert message.endswith(item.text) and counter.count(message) > 60  # over the memo's 60 at 4k


def test_N4_N5_checkpoint_keeps_late_rules_byte_identical_and_rewrite_does_not(counter: TokenCounter) -> None:
    scenario = generate("late_rule", 2, 40)
    model = ScriptedModel([_ticks_rules] * 400)
    ours = replay(
        scenario,
        make_strategy(CHECKPOINT, checkpoint_mode="structured"),
        model,
        counter,
        WINDOW,
        threshold=THRESHOLD,
    )
    assert ours.k >= 2
    assert all(c.meta["fallback"] is None for c in ours.compactions), [c.meta for c in ours.compactions]
    kept = measure(scenario, ours.context, counter)
    assert kept.counts["items_exact"] == (3, 3)
    assert kept.counts["mission_exact"] == (1, 1)

    rewrite = replay(scenario, make_strategy("rewrite"), ScriptedModel([respond] * 400), counter, WINDOW)
    assert rewrite.k >= 1
    retold = measure(scenario, rewrite.context, counter)
    assert retold.counts["items_exact"][0] < 3


def _ticks_whole_messages(request: ModelRequest) -> ModelReply:
    props: dict[str, Any] = request.json_schema["properties"] if request.json_schema else {}
    if "keep" not in props:
        return checkpoint_answer(request)
    return reply(
        json.dumps({"keep": [label for label in props["keep"]["items"]["enum"] if isinstance(label, int)]})
    )


def test_N2_N5_a_model_ticking_whole_messages_only_still_keeps_the_late_rules(counter: TokenCounter) -> None:
    """Ticking whole messages only, the cut would lose every late rule (0 of 3 before): the harness
    copies each rule-worded sentence the ticks leave out, verbatim with its pointer (N2)."""
    scenario = generate("late_rule", 2, 40)
    result = replay(
        scenario,
        make_strategy(CHECKPOINT, checkpoint_mode="structured"),
        ScriptedModel([_ticks_whole_messages] * 400),
        counter,
        WINDOW,
        threshold=THRESHOLD,
    )
    assert result.k >= 2 and measure(scenario, result.context, counter).counts["items_exact"] == (3, 3)
