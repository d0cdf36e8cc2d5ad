"""Validation of a proposed checkpoint and the one repair request (V1-V4).

API:
    validate(previous: CheckpointDraft | None, proposed: CheckpointDraft, budgets: Budgets,
             counter: TokenCounter, *, record: Mapping[int, Entry] | None = None,
             facts: HarnessFacts | None = None) -> list[Problem]
        Every problem at once, mind first, then memo, then scene; [] means accepted. Never raises.
        Mind (V2, M1, M4, M6): headings missing / renamed / repeated / reordered, Goals parts and entry
        forms, a mission id deleted or fewer mission entries than `previous`, a section over its cap
        (counted without <!-- --> guidance comments).
        Memo (V3, N4, N5, N7): with `record` (seq -> entry), every item must be a user entry's text byte for
        byte (or a prefix + cut note); without it only the cut-note form is checked. Items over the
        per-message cap, repeated items, the total over the memo budget.
        Scene (V1): exactly one block, six parts, at least SCENE_MIN_CHARS; with `facts`, the harness's
        lines for "Waiting for" and "Exact references" stand in those parts (S3, S6).
    repair_request(problems: Sequence[Problem]) -> str   one request listing them all (V4); raises
        ValueError when given no problem.
    Problem, CheckpointDraft, Checkpoint, MemoItem are re-exported from avibe.checkpoint.model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.facts import HarnessFacts, missing_facts
from avibe.checkpoint.memo import cut_note, memo_text_matches, memo_tokens, over_budget_problem, sentence_note
from avibe.checkpoint.mind import mission_ids, mission_lines, parse_mind, section_texts, strip_guidance
from avibe.checkpoint.model import Checkpoint, CheckpointDraft, MemoItem, Problem
from avibe.checkpoint.scene import parse_scene
from avibe.ports import TokenCounter
from avibe.prompts import fill
from avibe.record.entries import Entry

__all__ = ["Checkpoint", "CheckpointDraft", "MemoItem", "Problem", "repair_request", "validate"]

_WHERE = {"mind": "mind file", "memo": "memo checklist", "scene": "scene", "edit": "mind edit"}
_SHRINK_HINT = (
    "Shorten it: shrink finished workstreams to one line, merge repeated lessons into one principle, "
    "merge overturned decisions into the ones that replaced them."
)


def _mission_problems(previous_mind: str, mind: str) -> list[Problem]:
    """M4: mission entries are never deleted; the proposed mind has no fewer than the previous one."""
    before, after = mission_lines(previous_mind), set(mission_ids(mind))
    problems = [
        Problem(
            "mind.mission_deleted",
            f"Mission entry [{mid}] was deleted. Mission entries are never deleted: put this line back "
            f"and only change its status to (done), (withdrawn) or (replaced by M<n>): {line}",
        )
        for mid, line in before.items()
        if mid not in after
    ]
    if not problems and len(after) < len(before):
        message = f"The mind has {len(after)} mission entries; before it had {len(before)}. Put them back."
        problems.append(Problem("mind.mission_fewer", message))
    return problems


def _capped(body: str) -> tuple[str, str]:
    """What of a section its cap bounds, and a note on what it leaves out: the mission entries' lines are
    not counted (M4 over M6) - they are never deleted and the harness writes them from the user's words, so
    a long request alone could fill the cap, and every checkpoint after failed on it (a real Spanish session
    at an 8,192-token window: "'## Goals' is 104 tokens; its cap is 100" five times in a row, each time
    after four model calls, then moved out without the model)."""
    kept = [line for line in body.split("\n") if not mission_ids(line)]
    left_out = len(body.split("\n")) - len(kept)
    return "\n".join(kept), (" besides its mission entries" if left_out else "")


def _cap_problems(mind: str, budgets: Budgets, counter: TokenCounter) -> list[Problem]:
    problems = []
    for name, body in section_texts(strip_guidance(mind)).items():  # guidance comments are not content
        counted, besides = _capped(body)
        tokens, cap = counter.count(counted), budgets.mind_cap(name)
        if tokens > cap:
            message = f"'## {name}' is {tokens} tokens{besides}; its cap is {cap}. {_SHRINK_HINT}"
            problems.append(Problem("mind.section_over_cap", message))
    return problems


def _mind_problems(
    previous: CheckpointDraft | None, mind: str, budgets: Budgets, counter: TokenCounter
) -> list[Problem]:
    parsed = parse_mind(mind)
    problems = list(parsed) if isinstance(parsed, list) else []
    if previous is not None:
        problems += _mission_problems(previous.mind, mind)
    return problems + _cap_problems(mind, budgets, counter)


def _item_problems(item: MemoItem, record: Mapping[int, Entry] | None) -> list[Problem]:
    changed = Problem(
        "memo.text_changed",
        f"The memo text of #{item.seq} is not the user's message from the record. Avibe copies the "
        "user's words itself: do not retype them, only tick or untick boxes in the checklist.",
    )
    if record is None:
        notes = (cut_note(item.seq), sentence_note(item.seq))
        return [changed] if item.cut and not item.text.endswith(notes) else []
    entry = record.get(item.seq)
    if entry is None:
        return [Problem("memo.unknown_message", f"Message #{item.seq} is not in the record; untick it.")]
    if not entry.is_user:
        message = f"Message #{item.seq} was not written by the user ({entry.kind}); untick it."
        return [Problem("memo.not_user", message)]
    return [] if memo_text_matches(item, entry.text) else [changed]


def _memo_problems(
    memo: Sequence[MemoItem], budgets: Budgets, counter: TokenCounter, record: Mapping[int, Entry] | None
) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[int, str]] = set()
    for item in memo:  # a long message may be kept as several of its sentences, each once
        if (item.seq, item.text) in seen:
            problems.append(Problem("memo.item_repeated", f"Message #{item.seq} is in the memo twice."))
        seen.add((item.seq, item.text))
        problems += _item_problems(item, record)
        tokens = counter.count(item.text)
        if tokens > budgets.memo_per_message:
            message = f"Memo item #{item.seq} is {tokens} tokens; at most {budgets.memo_per_message} each."
            problems.append(Problem("memo.item_over_cap", message))
    total = memo_tokens(memo, counter)
    if total > budgets.memo_total:
        problems.append(over_budget_problem(total, budgets.memo_total))
    return problems


def validate(
    previous: CheckpointDraft | None,
    proposed: CheckpointDraft,
    budgets: Budgets,
    counter: TokenCounter,
    *,
    record: Mapping[int, Entry] | None = None,
    facts: HarnessFacts | None = None,
) -> list[Problem]:
    """Every problem of the proposed checkpoint at once (V1-V4); an empty list means it is accepted."""
    scene = parse_scene(proposed.scene)
    if isinstance(scene, list):
        scene_problems = scene
    else:
        scene_problems = missing_facts(scene, facts, budgets.window) if facts is not None else []
    return [
        *_mind_problems(previous, proposed.mind, budgets, counter),
        *_memo_problems(proposed.memo, budgets, counter, record),
        *scene_problems,
    ]


def repair_request(problems: Sequence[Problem]) -> str:
    """One request listing every problem, numbered, each saying where it is and what to do (V4)."""
    if not problems:
        raise ValueError("repair_request needs at least one problem")
    noun = "problem" if len(problems) == 1 else "problems"
    lines = [f"{n}. In the {_WHERE.get(p.part, p.part)}: {p.message}" for n, p in enumerate(problems, 1)]
    return fill("repair_problems", count=f"{len(problems)} {noun}", problems="\n".join(lines))
