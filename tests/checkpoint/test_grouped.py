"""Mode "grouped": the mind's and the scene's questions in one call. Fewer calls, and
the same checkpoint as one question a call gives for the same answers - each part's answer is applied by
the same code, so every harness guarantee (M4, N4, N7, V1-V5) holds as it does there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_doubles import AT, CharCounter, drive, make_entry

from avibe.checkpoint.budgets import budgets_for
from avibe.checkpoint.mind import mission_lines
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.checkpoint.turn import Accepted, TurnInputs, checkpoint_turn
from avibe.providers.scripted import ModelRequest, ScriptedModel, reply
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelReply

MIND = """\
## I am here
- I work for Ana on the payments repo.

## Goals
### Mission
- [M1] (active) Review every open PR oldest first.

### Workstreams
- [W1] (active) PR queue; next: #412
- [W2] (done) Set up the dev environment

## Key decisions
- Review with the full test suite - because CI misses flaky tests

## Lessons
"""
KEPT = "Handle the PRs oldest first and ask me only when you need a decision."
SCENE = {
    "current_step": "reviewing PR #413 in workstream W1, the PR queue",
    "progress": "done: #410, #411, #412; in progress: #413",
    "next_step": 'go on with #413; the user said "never merge on a Friday"',
    "pitfalls": "none so far",
}
# Each part's answer, by the part's own keys (one question a call answers exactly these).
ANSWERS: dict[str, dict[str, Any]] = {
    "memo": {"keep": [2, 13], "user_changed_mission": True},
    "mission": {
        "user_changed_mission": True,
        "new": ["Review the PRs and merge nothing on Fridays"],
        "from_message": 13,
        "status": [{"id": "M1", "status": "replaced by M2"}],
    },
    "workstreams": {
        "workstreams": [{"id": "W1", "status": "active", "text": "PR queue; next: #413"}],
        "retire": ["W2"],
    },
    "notes": {
        "i_am_here": [],
        "decisions": [{"decision": "Merge nothing on a Friday", "reason": "the user asked for it"}],
        "lessons": ["A green CI run is not a review of the diff."],
        "merge": [],
        "retire": ["H1"],
    },
    "scene": SCENE,
}
MARK = {
    "memo": "keep",
    "mission": "new",
    "workstreams": "workstreams",
    "notes": "lessons",
    "scene": "progress",
}


def _answer(request: ModelRequest) -> ModelReply:
    """Answers whatever parts the request asks, by their keys - "retire" under its per-part name when
    the call renamed it."""
    props = set((request.json_schema or {}).get("properties", {}))
    data: dict[str, Any] = {}
    for part, answer in ANSWERS.items():
        named = {k: f"{k}_{part}" if f"{k}_{part}" in props else k for k in answer}
        if MARK[part] in props:  # the part is asked: its keys that the call has
            data |= {named[k]: v for k, v in answer.items() if named[k] in props}
    assert set(data) == props, (props, data)
    return reply(json.dumps(data))


def _moved() -> tuple[Entry, ...]:
    return (
        make_entry(10, "Reviewing #412.", kind="assistant"),
        make_entry(11, "CI finished: green.", kind="callback"),
        make_entry(12, "Merged #412; on to #413.", kind="assistant"),
        make_entry(13, "Never merge on a Friday, from now on."),
    )


def _turn(
    mode: str, moved: tuple[Entry, ...] | None = None, *, first: bool = False
) -> tuple[Accepted, list[ModelRequest]]:
    moved = moved or _moved()
    live = (
        ChatMessage("system", "You are Vibey."),
        *(ChatMessage("user" if e.is_user else "assistant", e.text, seq=e.seq, kind=e.kind) for e in moved),
    )
    inputs = TurnInputs(
        mode=mode,  # type: ignore[arg-type]
        live_messages=live,
        previous=None if first else Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene=""),
        moved_entries=moved,
        budgets=budgets_for(32_000, 28_000),
        counter=CharCounter(),
        at=AT,
        memo_entries=() if first else (make_entry(2, KEPT),),
        upto_seq=max(e.seq for e in moved),
    )
    model = ScriptedModel([_answer] * 8)
    run = drive(checkpoint_turn(inputs), model)
    assert isinstance(run.outcome, Accepted), run.outcome
    return run.outcome, list(model.requests)


def test_grouped_asks_two_calls_where_one_a_call_asks_five_and_keeps_the_same_checkpoint() -> None:
    alone, one_by_one = _turn("structured")
    grouped, requests = _turn("grouped")
    assert len(one_by_one) == 5 and len(requests) == 2
    assert set(requests[0].json_schema["properties"]) == {"keep", "user_changed_mission"}  # type: ignore[index]
    assert grouped.checkpoint == alone.checkpoint
    assert grouped.dismissed_seqs == alone.dismissed_seqs and not grouped.first_pass_problems
    lines = mission_lines(grouped.checkpoint.mind)
    assert lines["M2"] == "- [M2] (active) (from #13) Review the PRs and merge nothing on Fridays"  # M4
    assert lines["M1"].startswith("- [M1] (replaced by M2)")
    assert "[W2]" not in grouped.checkpoint.mind and "I work for Ana" not in grouped.checkpoint.mind
    assert [item.seq for item in grouped.checkpoint.memo] == [2, 13]  # N4: the record's words


def test_grouped_renames_only_the_shared_key_and_says_so_in_the_question() -> None:
    _, requests = _turn("grouped")
    props = requests[1].json_schema["properties"]  # type: ignore[index]
    assert {"retire_workstreams", "retire_notes", "merge", "new", "workstreams", "lessons"} <= set(props)
    assert "retire" not in props and "current_step" in props
    question = requests[1].messages[-1].content
    assert '"retire_notes"' in question and '"retire"' not in question
    assert question.count("Answer with JSON only") == 0 and "in one JSON object" in question


def test_grouped_without_a_user_message_is_one_call() -> None:
    """No user message moves out: no memo question, no mission question; the rest is one call."""
    moved = _moved()[:3]
    grouped, requests = _turn("grouped", moved)
    alone, one_by_one = _turn("structured", moved)
    assert len(requests) == 1 and len(one_by_one) == 2  # workstreams, scene (no notes due)
    assert grouped.checkpoint == alone.checkpoint
    assert mission_lines(grouped.checkpoint.mind) == mission_lines(MIND)


def test_grouped_unreadable_answer_is_repaired_by_asking_the_group_again() -> None:
    """V4: the one repair round asks again every part the unreadable answer left undone."""
    answers = iter([reply(json.dumps(ANSWERS["memo"])), reply("not json")])

    def answer(request: ModelRequest) -> ModelReply:
        return next(answers, None) or _answer(request)

    moved = _moved()
    inputs = TurnInputs(
        mode="grouped",
        live_messages=(ChatMessage("system", "You are Vibey."),),
        previous=Checkpoint(mind=MIND, memo=(MemoItem(2, KEPT),), scene=""),
        moved_entries=moved,
        budgets=budgets_for(32_000, 28_000),
        counter=CharCounter(),
        at=AT,
        memo_entries=(make_entry(2, KEPT),),
        upto_seq=13,
    )
    run = drive(checkpoint_turn(inputs), ScriptedModel([answer] * 4))
    assert isinstance(run.outcome, Accepted) and run.outcome.repaired, run.outcome
    assert len(run.calls) == 3
    assert "current_step" in (run.calls[2].json_schema or {}).get("properties", {})
    assert mission_lines(run.outcome.checkpoint.mind)["M2"].endswith("merge nothing on Fridays")


@pytest.mark.parametrize("first", [True, False])
def test_F3_every_grouped_schema_compiles_to_a_llama_cpp_grammar(first: bool) -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    _, requests = _turn("grouped", first=first)
    schemas = [r.json_schema for r in requests]
    assert schemas and all(schema is not None for schema in schemas)
    for schema in schemas:
        assert grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) is not None


def _greedy(request: ModelRequest) -> ModelReply:
    """The longest answer the grammar allows: every list full, every string at its maxLength, every
    enum's last value (a small model fills whatever room it is given)."""

    def fill(schema: dict[str, Any], char: str) -> Any:
        if "enum" in schema:
            return schema["enum"][-1]
        if schema.get("type") == "object":
            return {name: fill(sub, char) for name, sub in schema["properties"].items()}
        if schema.get("type") == "array":
            if "enum" in schema["items"]:
                return list(schema["items"]["enum"])[: schema.get("maxItems", 3)]
            return [fill(schema["items"], chr(ord(char) + i)) for i in range(schema.get("maxItems", 3))]
        if schema.get("type") == "string":
            return (char + " word") * (schema.get("maxLength", 50) // 6) + char
        return True if schema.get("type") == "boolean" else 13

    return reply(json.dumps(fill(dict(request.json_schema or {}), "a")))


def test_M6_grouped_sizes_the_workstreams_after_the_mission_it_is_asked_with() -> None:
    """Asked one a call, the workstreams question is sized after the mission's answer took its room in
    Goals; asked together it is sized as if the mission's longest entry were there: a greedy model at a
    4,096 window then fills Goals within its cap, with no room question (a third call) to make space."""
    from avibe.checkpoint.mind import EMPTY_MIND, section_texts, strip_guidance
    from avibe.checkpoint.structured import Work, ask

    budgets = budgets_for(4096, 2048)
    alone = ask(("workstreams",), Work.start(EMPTY_MIND, [], budgets, CharCounter()))
    together = ask(("mission", "workstreams"), Work.start(EMPTY_MIND, [], budgets, CharCounter()))
    assert alone is not None and together is not None
    alone_text, together_text = (
        a.question.schema["properties"]["workstreams"]["items"]["properties"]["text"]
        for a in (alone, together)
    )
    assert together_text["maxLength"] < alone_text["maxLength"]

    moved = (make_entry(3, "Get the suite green; open a pull request for every change."), *_moved())
    inputs = TurnInputs(
        mode="grouped",
        live_messages=(ChatMessage("system", "You are Vibey."),),
        previous=None,
        moved_entries=moved,
        budgets=budgets,
        counter=CharCounter(),
        at=AT,
        upto_seq=13,
    )
    run = drive(checkpoint_turn(inputs), ScriptedModel([_greedy] * 6))
    assert isinstance(run.outcome, Accepted), run.outcome
    assert len(run.calls) == 2  # memo; mission, workstreams, notes and scene - no room question
    goals = strip_guidance(section_texts(run.outcome.checkpoint.mind)["Goals"])
    assert CharCounter().count(goals) <= budgets.goals


def test_three_asks_the_memo_the_mind_and_the_scene_and_keeps_the_same_checkpoint() -> None:
    """Mode "three" (at most three calls a checkpoint, docs/benchmarks.md): the mind's questions in one
    call, the scene alone."""
    alone, one_by_one = _turn("structured")
    three, requests = _turn("three")
    assert len(one_by_one) == 5 and len(requests) == 3
    asked = [set(r.json_schema["properties"]) for r in requests]  # type: ignore[index]
    assert asked[0] == {"keep", "user_changed_mission"}
    assert {"new", "workstreams", "lessons", "retire_workstreams", "retire_notes"} <= asked[1]
    assert "current_step" not in asked[1] and "current_step" in asked[2] and "keep" not in asked[2]
    assert three.checkpoint == alone.checkpoint and not three.first_pass_problems
    assert [item.seq for item in three.checkpoint.memo] == [2, 13]  # N4: the record's words


@pytest.mark.parametrize("first", [True, False])
def test_F3_every_three_schema_compiles_to_a_llama_cpp_grammar(first: bool) -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    _, requests = _turn("three", first=first)
    assert len(requests) == 3
    for request in requests:
        assert grammar.LlamaGrammar.from_json_schema(json.dumps(request.json_schema), verbose=False)
