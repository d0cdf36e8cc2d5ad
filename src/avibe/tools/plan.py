"""update_plan: the agent keeps its queue as structured items (pending / in progress / done), like Claude
Code's todo list and Codex's update_plan. The harness keeps the plan in the live state, shows it in the
tool's result and carries it verbatim through checkpoints (the recollection and the scene), so where the
work stands in a queue never depends on what a small model writes at checkpoint time."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, cast

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.checkpoint import PlanItem, PlanStatus, next_step, render_plan
from avibe.record.messages import ToolSpec
from avibe.tools.base import BaseTool, schema

MAX_ITEMS: Final = 50
MAX_STEP_CHARS: Final = 200


# One step a line, its status in front: small models write a checklist more reliably than nested JSON.
_LINE = re.compile(r"^\s*(?:[-*]\s*|\d+[.)]\s*)?(?:\[(?P<mark>[ xX>~*-]?)\]\s*)?(?P<step>.*?)\s*$")
_STATUS = {"": "pending", " ": "pending", "x": "done", "X": "done", ">": "in_progress", "~": "in_progress",
           "*": "in_progress", "-": "in_progress"}  # fmt: skip


class UpdatePlan(BaseTool):
    def __init__(self) -> None:
        self._spec = ToolSpec(
            name="update_plan",
            description=(
                "Keep your plan: the whole list of steps (a queue of tickets, files, PRs ...), one a line, "
                "each marked [ ] pending, [>] in progress or [x] done; at most one in progress. Send the "
                "whole list each time; Avibe keeps it for you across checkpoints."
            ),
            parameters=schema({"plan": ("string", "the steps, one a line, e.g. '[x] ticket 001'")}, ["plan"]),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        plan = parse_plan(args["plan"])
        done = sum(p.status == "done" for p in plan)
        text = f"Plan updated ({done} of {len(plan)} done):\n{render_plan(plan)}\n{next_step_line(plan)}"
        return self.report(args, text)

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        """The plan the call set, read from its argument (ToolError for one that is no plan)."""
        return ToolResult(output=output, plan=parse_plan(str(args["plan"])))


def next_step_line(plan: tuple[PlanItem, ...]) -> str:
    """What to do now, said after the plan: a small model sent the same plan again and again instead of
    working on its first step (the demo's 1.5B, until the loop stop)."""
    current = next_step(plan)
    if current is None:
        return "Every step is done: tell the user."
    # "call update_plan", not "send the plan": the demo's 1.5B answered "send" with send_to_session
    return f"Next: {current.step} - work on it now; call update_plan again only when a step's status changes."


# A checklist written on one line, "[x] ticket 001; [ ] ticket 002" (the demo's 1.5B did): one step each.
_INLINE_MARK = re.compile(r"\s*;\s*(?=\[[ xX>~*-]?\]\s)")


def _lines(text: str) -> list[str]:
    return [part for line in text.splitlines() for part in _INLINE_MARK.split(line)]


def parse_plan(text: str) -> tuple[PlanItem, ...]:
    """The steps of a checklist, in order; ToolError (for the model) when it is not a usable plan."""
    plan: list[PlanItem] = []
    for line in _lines(text):
        found = _LINE.match(line)
        if found is None or not found["step"]:
            continue
        step = " ".join(found["step"].split())
        if len(step) > MAX_STEP_CHARS:
            raise ToolError(
                f"update_plan: a step of {len(step)} characters; keep each under {MAX_STEP_CHARS}"
            )
        status = cast(PlanStatus, _STATUS[found["mark"] or ""])
        plan.append(PlanItem(step, status))
    if not plan:
        raise ToolError("update_plan: the plan is empty; list the steps, one a line, e.g. '[ ] ticket 003'")
    if len(plan) > MAX_ITEMS:
        raise ToolError(f"update_plan: {len(plan)} steps; keep the plan to {MAX_ITEMS} (merge some)")
    doing = [p.step for p in plan if p.status == "in_progress"]
    if len(doing) > 1:
        raise ToolError(f"update_plan: {len(doing)} steps in progress ({'; '.join(doing)}); mark one [>]")
    return tuple(plan)
