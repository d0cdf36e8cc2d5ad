"""M3 on the small-model path and caps that never make a checkpoint impossible (item 2;
M4, M6, L3). Structured turns driven by the strict ScriptedModel, answering each question by its schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core_doubles import AT, CharCounter, drive, make_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.mind import EMPTY_MIND, mission_lines, section_texts, strip_guidance
from avibe.checkpoint.model import Checkpoint
from avibe.checkpoint.turn import Accepted, TurnInputs, checkpoint_turn
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.messages import ChatMessage, ModelReply

COUNTER = CharCounter()
SCENE = {
    "current_step": "exporting the ledger with the current plan in workstream W1, the export",
    "progress": "done: the earlier stages; in progress: the current stage; pending: the upload",
    "waiting_for": "none",
    "next_step": 'the next stage, as the user asked: "use the new plan from now on"',
    "pitfalls": "none",
    "exact_references": "exports/, plan.md",
}


def _within_caps(mind: str, budgets: Any) -> dict[str, int]:
    """Sections over their cap: name -> tokens (empty when every section fits)."""
    over = {}
    for name, body in section_texts(strip_guidance(mind)).items():
        if COUNTER.count(body) > budgets.mind_cap(name):
            over[name] = COUNTER.count(body)
    return over


@dataclass
class Planner:
    """A model that follows a changing plan: each checkpoint k decides "Use plan v{k}" (overturning the
    last), learns a lesson, opens a stage workstream and closes the last; the user changes the mission at
    k = 7 and 14. Asked for room, it merges the oldest entries of each full section (or, `merges=False`,
    answers with empty lists)."""

    merges: bool = True
    k: int = 0
    room_asked: int = 0
    seen: list[str] = field(default_factory=list)

    def __call__(self, request: ModelRequest) -> ModelReply:
        assert request.json_schema is not None
        props = request.json_schema["properties"]
        question = request.messages[-1].content
        data: dict[str, Any]
        if "keep" in props:
            data = {"keep": [props["keep"]["items"]["enum"][-1]]}
        elif "new" in props:
            data = self._mission(props, question)
        elif "workstreams" in props:
            data = self._workstreams(props, question)
        elif "lessons" in props:
            data = {
                "i_am_here": [],
                "decisions": [{"decision": f"Use plan v{self.k} for the export", "reason": f"step {self.k}"}],
                "lessons": [f"Check the export totals after stage {self.k} against plan.md"],
                "merge": [],
                "retire": [],
            }
        elif "merge" in props:
            self.room_asked += 1
            data = self._room(props) if self.merges else {"merge": [], "retire": []}
        else:
            data = dict(SCENE)
        return reply(json.dumps(data))

    def _mission(self, props: dict[str, Any], question: str) -> dict[str, Any]:
        if "user_changed_mission" not in props:
            return {"new": ["Export the ledger with the plan the user gives"]}
        if self.k not in (7, 14):
            return {"user_changed_mission": False, "new": [], "status": []}
        numbers = {
            int(line.split("]")[0][4:]): line for line in question.splitlines() if line.startswith("- [M")
        }
        active = [n for n, line in numbers.items() if "(active)" in line]
        new_id = f"M{1 + max(numbers)}"
        return {
            "user_changed_mission": True,
            "new": [f"Export the ledger and the invoices, plan {self.k}"],
            "from_message": max(props["from_message"]["enum"]),  # M4: the user's message that changed it
            "status": [{"id": f"M{a}", "status": f"replaced by {new_id}"} for a in active],
        }

    def _workstreams(self, props: dict[str, Any], question: str) -> dict[str, Any]:
        ids = [i for i in props["workstreams"]["items"]["properties"]["id"]["enum"] if i != "new"]
        items = [{"id": i, "status": "done", "text": ""} for i in ids[-1:]]
        items.append({"id": "new", "status": "active", "text": f"stage {self.k} of the export"})
        retire_enum = props.get("retire", {"items": {}})["items"].get("enum", [])  # no key without ids
        return {"workstreams": items, "retire": [i for i in ids[:-2] if i in retire_enum]}

    def _room(self, props: dict[str, Any]) -> dict[str, Any]:
        labels = props["retire"]["items"].get("enum", [])
        merges = []
        for prefix in ("D", "L", "H"):
            group = [label for label in labels if label.startswith(prefix)]
            if len(group) >= 2:
                merges.append({"ids": group, "text": f"Earlier plans and checks up to step {self.k - 1}"})
        retire = [label for label in labels if label.startswith("W")][:-1]
        return {"merge": merges, "retire": retire}


def _inputs(previous: Checkpoint, k: int, budgets: Any) -> TurnInputs:
    seq = 10 * (k + 1)
    # the words of a new mission entry are the user's (M4, checked by the harness)
    message = make_entry(seq, f"Change of plan: export the ledger and the invoices, plan {k}, from now on.")
    return TurnInputs(
        mode="structured",
        live_messages=(ChatMessage("system", "You are Vibey."), ChatMessage("user", message.text, seq=seq)),
        previous=previous if k else None,
        moved_entries=(message,),
        budgets=budgets,
        counter=COUNTER,
        at=AT,
        memo_entries=tuple(
            make_entry(i.seq, f"Change of plan: export the ledger and the invoices, plan {n}, from now on.")
            for i in previous.memo
            for n in [i.seq // 10 - 1]
        ),
        upto_seq=seq,
    )


def _twenty(planner: Planner, window: int = 4_096) -> list[tuple[Any, Any]]:
    budgets = budgets_for(window, window // 2)
    previous = Checkpoint(mind=EMPTY_MIND, memo=(), scene="")
    results = []
    missions = 0
    for k in range(20):
        planner.k = k
        model = ScriptedModel([planner] * 12)  # 5 or 6 questions (room only when full), 12 with a repair
        run = drive(checkpoint_turn(_inputs(previous, k, budgets)), model)
        outcome = run.outcome
        assert isinstance(outcome, Accepted), (k, getattr(outcome, "problems", None))
        mind = outcome.checkpoint.mind
        assert len(mission_lines(mind)) >= missions  # M4: mission entries never go
        missions = len(mission_lines(mind))
        results.append((outcome, _within_caps(mind, budgets)))
        previous = outcome.checkpoint
    return results


def test_M3_twenty_checkpoints_over_a_changing_plan_stay_within_caps_and_keep_the_latest_decision() -> None:
    planner = Planner()
    results = _twenty(planner)
    assert planner.room_asked >= 2  # the sections filled up and the model was asked what to merge
    for k, (outcome, over) in enumerate(results):
        assert over == {}, (k, over)
        assert f"Use plan v{k} for the export" in outcome.checkpoint.mind  # the latest decision is kept
    final = results[-1][0].checkpoint.mind
    missions = mission_lines(final)
    assert len(missions) == 3 and "(replaced by M2)" in missions["M1"] and "(active)" in missions["M3"]
    assert any("merge" not in n and "entry retired" in n for o, _ in results for n in o.notes)


def test_M3_without_merging_the_latest_decision_is_left_out_with_a_note() -> None:
    """The control: a model that will not merge keeps every section within its cap, but the newest
    decision no longer fits - which is why the room question asks."""
    results = _twenty(Planner(merges=False))
    assert all(over == {} for _, over in results)
    lost = [k for k, (o, _) in enumerate(results) if f"Use plan v{k} for the export" not in o.checkpoint.mind]
    assert lost and any("left out to keep '## Key decisions'" in n for n in results[lost[0]][0].notes)


# ---- a cap never makes a checkpoint impossible (M4, M6, L3) -------------------------------------------


def _answer_with(mission_text: str, workstream_text: str, lesson: str) -> Any:
    def answer(request: ModelRequest) -> ModelReply:
        props = request.json_schema["properties"] if request.json_schema else {}
        if "keep" in props:
            return reply(json.dumps({"keep": []}))
        if "new" in props:
            data: dict[str, Any] = {"new": [mission_text] if mission_text else [], "status": []}
            if "user_changed_mission" in props:
                data["user_changed_mission"] = True
            return reply(json.dumps(data))
        if "workstreams" in props:
            return reply(
                json.dumps({"workstreams": [{"id": "new", "status": "active", "text": workstream_text}]})
            )
        if "lessons" in props:
            return reply(json.dumps({"i_am_here": [lesson], "decisions": [], "lessons": [lesson]}))
        if "merge" in props:
            return reply(json.dumps({"merge": [], "retire": []}))
        return reply(json.dumps(SCENE))

    return answer


WORDS = st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=9), max_size=80).map(" ".join)


@given(
    first=WORDS,
    mission=WORDS,
    workstream=WORDS,
    lesson=WORDS,
    missions_before=st.integers(0, 6),
    window=st.sampled_from([4_096, 6_144, 8_192, 16_384]),
)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_M4_M6_L3_whatever_the_answers_every_section_fits_and_no_mission_entry_is_lost(
    first: str, mission: str, workstream: str, lesson: str, missions_before: int, window: int
) -> None:
    budgets = budgets_for(window, window // 2)
    entries = "\n".join(f"- [M{n}] (done) goal {n}" for n in range(1, missions_before + 1))
    mind = (
        EMPTY_MIND
        if not missions_before
        else EMPTY_MIND.replace("### Mission\n", f"### Mission\n{entries}\n", 1)
    )
    previous = Checkpoint(mind=mind, memo=(), scene="") if missions_before else None
    message = make_entry(3, "Our goal for this whole session: " + first + " " + first)
    inputs = TurnInputs(
        mode="structured",
        live_messages=(ChatMessage("system", "You are Vibey."),),
        previous=previous,
        moved_entries=(message,),
        budgets=budgets,
        counter=COUNTER,
        at=AT,
        upto_seq=3,
    )
    run = drive(checkpoint_turn(inputs), ScriptedModel([_answer_with(mission, workstream, lesson)] * 12))
    outcome = run.outcome
    assert isinstance(outcome, Accepted), getattr(outcome, "problems", None)
    final = outcome.checkpoint.mind
    assert _within_caps(final, budgets) == {}
    assert set(mission_lines(mind)) <= set(mission_lines(final)) and mission_lines(final)  # M4, P1
    quoted = [line for line in mission_lines(final).values() if "(message #3)" in line]
    for line in quoted:  # the harness's quote of the user: cut with a pointer to the whole message
        if first and len(line) < len(message.text):
            assert line.endswith("[... cut; full text: message #3 in the record]")
