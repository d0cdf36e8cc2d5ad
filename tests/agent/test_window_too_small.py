"""A checkpoint that lasts (V8), through Vibey with its real checkpoint turn, store and tools on a
scripted model: where the system prompt, the tools and the recollection alone take more than
LASTING_SHARE of the trigger threshold, no checkpoint can last - each counts as freeing too little and the
person is told once, in one plain line, that the window is too small, with a window that would work. A
checkpoint in the same window with a small system prompt lasts and says nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vibey_doubles import Harness, answer, tool_step, write_lines

from avibe.agent.compaction.room import too_small_line
from avibe.checkpoint.budgets import LASTING_SHARE
from avibe.checkpoint.trigger import threshold_for
from avibe.host.events import CheckpointAccepted, Notice
from avibe.providers.scripted import ModelRequest, reply
from avibe.record.messages import ModelFacts, ModelReply

WINDOW = 10_000
# about 4,400 tokens of project instructions: with the tools and a recollection, over 65% of the threshold
RULE = "- Rule {:03d}: keep the changelog in step with every release note.\n"
LONG_AGENTS_MD = "".join(RULE.format(i) for i in range(250))


def _reading(names: list[str]) -> list[Any]:
    """A model that reads each file in turn, one a turn, and answers every checkpoint question correctly
    (however many turns the checkpoints come at)."""
    todo = [step for name in names for step in (tool_step("read_file", path=name), reply(f"{name} read"))]

    def step(request: ModelRequest) -> ModelReply:
        return answer(request) if request.json_schema else todo.pop(0)

    return [step] * (len(todo) + 40)


def _read_all(h: Harness, names: list[str], lines: int) -> None:
    for name in names:
        write_lines(h.workdir, name, lines)
    for name in names:
        assert h.send(f"Read {name}.").reply == f"{name} read"  # the work goes on


def test_V8_a_window_too_small_for_the_fixed_parts_is_told_once_with_a_window_that_works(
    make_harness: Callable[..., Harness],
) -> None:
    names = [f"notes-{i}.txt" for i in range(8)]
    h = make_harness(_reading(names), window=WINDOW, agents_md=LONG_AGENTS_MD)
    _read_all(h, names, 50)
    threshold = h.vibey.limits.threshold
    accepted = [e for e in h.events if isinstance(e, CheckpointAccepted)]
    assert len(accepted) == 2 and all(e.fallback is None for e in accepted)
    assert all(e.after > threshold * LASTING_SHARE for e in accepted)
    assert h.vibey.room.run.too_little == 2  # each freed too little (V8): no more checkpoints this run
    told = [e.message for e in h.events if isinstance(e, Notice)]
    assert len(told) == 1  # once, for both checkpoints
    first = h.events.index(accepted[0])
    assert isinstance(h.events[first + 1], Notice)  # at the first checkpoint
    line = told[0]
    assert "\n" not in line and "too small for this task" in line and "V8" not in line
    wanted = int(re.search(r"a window of about ([\d,]+) tokens would work", line)[1].replace(",", ""))  # type: ignore[index]
    fixed = int(re.search(r"alone take ([\d,]+) of", line)[1].replace(",", ""))  # type: ignore[index]
    # the window named holds the fixed parts under the share; one step smaller does not
    assert fixed > threshold * LASTING_SHARE and wanted > WINDOW
    assert fixed <= threshold_for(ModelFacts("scripted", wanted, 1_000)) * LASTING_SHARE
    assert fixed > threshold_for(ModelFacts("scripted", wanted - 1_024, 1_000)) * LASTING_SHARE


def test_V8_a_checkpoint_that_lasts_counts_no_strike_and_says_nothing(
    make_harness: Callable[..., Harness],
) -> None:
    names = [f"notes-{i}.txt" for i in range(4)]
    h = make_harness(_reading(names), window=WINDOW)
    _read_all(h, names, 180)
    accepted = [e for e in h.events if isinstance(e, CheckpointAccepted)]
    assert accepted and all(e.fallback is None for e in accepted)
    assert h.vibey.room.run.strikes == 0
    assert not [e for e in h.events if isinstance(e, Notice)]


def test_V8_the_line_without_a_window_that_works() -> None:
    """A price tier caps the threshold: no window holds the fixed parts, and the line says so."""
    capped = ModelFacts("tiered", 8_000, 1_000, price_tier_at=2_000)
    line = too_small_line(capped, 5_000, 2_000)
    assert "a model with a larger window would work better" in line and "would work." not in line
