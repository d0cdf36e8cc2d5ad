"""update_plan: the agent's queue as a checklist the harness keeps."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.record.checkpoint import PlanItem, render_plan
from avibe.tools.plan import MAX_ITEMS, UpdatePlan, parse_plan


def test_a_checklist_becomes_the_plan_in_order_with_its_statuses() -> None:
    result = UpdatePlan().run(
        {"plan": "[x] ticket 001\n- [x] ticket 002\n[>] ticket 003\n[ ] ticket 004\nticket 005"}
    )
    assert not result.is_error and result.plan == (
        PlanItem("ticket 001", "done"),
        PlanItem("ticket 002", "done"),
        PlanItem("ticket 003", "in_progress"),
        PlanItem("ticket 004"),
        PlanItem("ticket 005"),
    )
    assert result.output.startswith("Plan updated (2 of 5 done):") and "[>] ticket 003" in result.output
    assert result.output.endswith("\nNext: ticket 003 - work on it now; call update_plan again only when a "
                                  "step's status changes.")  # fmt: skip


def test_a_checklist_on_one_line_is_one_step_a_mark() -> None:
    """The demo's 1.5B wrote its plan as '[ ] ticket 001; [ ] ticket 002; ...' - one step, before."""
    plan = parse_plan("[x] ticket 001; [ ] ticket 002;[>] ticket 003\n[ ] ticket 004; then 005")
    assert plan == (
        PlanItem("ticket 001", "done"),
        PlanItem("ticket 002"),
        PlanItem("ticket 003", "in_progress"),
        PlanItem("ticket 004; then 005"),  # a semicolon not before a mark is the step's own text
    )


def test_the_next_step_is_the_one_in_progress_else_the_first_pending_else_none() -> None:
    assert "Next: b -" in UpdatePlan().run({"plan": "[ ] a\n[>] b"}).output
    assert "Next: a -" in UpdatePlan().run({"plan": "[x] z\n[ ] a\n[ ] b"}).output
    assert UpdatePlan().run({"plan": "[x] a\n[x] b"}).output.endswith("Every step is done: tell the user.")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the plan is empty"),
        ("\n  \n", "the plan is empty"),
        ("[>] a\n[>] b", "2 steps in progress"),
        ("[ ] " + "x" * 300, "a step of 300 characters"),
        ("\n".join(f"[ ] step {i}" for i in range(MAX_ITEMS + 1)), f"keep the plan to {MAX_ITEMS}"),
    ],
)
def test_a_plan_the_harness_cannot_keep_is_a_tool_error_the_model_can_fix(text: str, problem: str) -> None:
    result = UpdatePlan().run({"plan": text})
    assert result.is_error and problem in result.output and result.plan is None


@given(st.lists(st.tuples(st.sampled_from(["pending", "done", "in_progress"]),
                          st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1,
                                  max_size=40).map(lambda t: " ".join(t.split())).filter(bool)
                          .filter(lambda t: not re.search(r";\s*\[", t))),  # "; [x] b" starts a step
                min_size=1, max_size=10))  # fmt: skip
def test_a_rendered_plan_reads_back_as_the_same_plan(items: list[tuple[str, str]]) -> None:
    doing = [i for i, (status, _) in enumerate(items) if status == "in_progress"]
    plan = tuple(PlanItem(step, status if i in doing[:1] or status != "in_progress" else "pending")  # type: ignore[arg-type]
                 for i, (status, step) in enumerate(items))  # fmt: skip
    assert parse_plan(render_plan(plan)) == plan
