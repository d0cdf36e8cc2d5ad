"""The plan tool in the loop: the harness keeps the agent's plan and carries it
verbatim through a checkpoint, so after the checkpoint the model still sees where the queue stands -
whatever it wrote in the scene. Fails with the carry turned off."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vibey_doubles import BEFORE_STEPS, tool_step, write_lines

from avibe.providers.scripted import reply

PLAN = "[x] ticket 001\n[x] ticket 002\n[>] ticket 003\n[ ] ticket 004\n[ ] ticket 005"
SCENE = {
    "current_step": "reading the files the user named, one after the other",
    "progress": "some of the files are read; the rest are still to do",
    "waiting_for": "nothing: no background commands or questions open",
    "next_step": "go on with the next file, as the user asked",
    "pitfalls": "none so far in this part of the work",
    "exact_references": "the working directory of this session",
}  # a vague scene: no queue position in it


def _steps() -> list[Any]:
    from vibey_doubles import answer

    return [
        tool_step("update_plan", plan=PLAN),
        *BEFORE_STEPS,
        tool_step("read_file", path="c.txt"),
        *[lambda r: answer(r, scene=SCENE) for _ in range(5)],
        reply("c read"),
    ]


def _run(make_harness: Any, keep_plan: bool = True) -> Any:
    h = make_harness(_steps())
    if not keep_plan:
        dispatch = h.vibey.run_tool
        h.vibey.run_tool = lambda call: replace(dispatch(call), plan=None)
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(h.workdir, name, lines)
    h.send("Work through tickets 001-005 oldest first; plan them, then read a.txt.")
    h.send("Read b.txt.")
    h.send("Read c.txt.")
    h.model.assert_consumed()
    return h


def test_the_plan_survives_a_checkpoint_verbatim(make_harness: Any) -> None:
    h = _run(make_harness)
    [stored] = h.checkpoints()
    assert "\n".join(p.line() for p in stored.carry.plan) == PLAN
    assert "[>] ticket 003" in stored.scene and "[ ] ticket 004" in stored.scene  # S2: in the scene too
    after = h.model.requests[-1].messages
    tool_results = [m.content for m in after if m.role == "tool"]
    assert not any("Plan updated" in c for c in tool_results)  # the update_plan result moved out ...
    assert PLAN in after[1].content and "## My plan" in after[1].content  # ... the recollection has it


def test_without_the_carry_the_queue_position_is_lost(make_harness: Any) -> None:
    """The test above fails when the harness does not keep the plan: the tool port here reports the
    update_plan output but not the plan, so neither the recollection nor the scene has it."""
    h = _run(make_harness, keep_plan=False)
    assert "[>] ticket 003" not in "\n".join(
        m.content for m in h.model.requests[-1].messages
    )  # ... nor scene
