"""The structured checkpoint for small local models: a few small JSON questions, answered under a grammar.

A 0.5B model asked for a free-form checkpoint echoes the instructions and ticks whatever it can count. So
each question here is small and comes with a JSON schema (llama.cpp turns it into a grammar), and the
harness - not the model - turns the answers into EDITS on the mind (`apply_edit`, never a rewrite), ticks
on the checklist, and a scene rendered by `render_scene`. The memo's text is never taken from an answer:
an answer only names message numbers, and `build_memo` copies the text from the record (N4, N7).

Modules: `work` (the working values, limits, answer cleaning), `schemas` (grammar sizing), `questions`,
`answers`, `edits` (mind edits within the caps), `groups` (the questions asked in one call). The turn
that asks them is `checkpoint/structured_mode.py`.

API (used by structured_mode.py):
    PARTS = ("memo", "mission", "workstreams", "notes", "room", "scene")   room: only when a full section
                                                  left new entries out (M3: which entries merge?)
    Question(part, text, schema)
    Work.start(previous_mind, candidates, budgets) -> Work      .reset(parts, previous_mind)
    groups(mode, parts) -> the parts asked together, call by call    ("structured": one a call; "grouped")
    ask(parts, work) -> Asked | None    apply_group(asked, work, text)   one call's question; its answer
    question(part, work) -> Question | None                      None: nothing to ask (no memo candidates,
                                                  no notes due ...): the part stays as "no change" leaves it
    notes_due(first, user_texts, other_texts) -> bool             whether the notes question is worth a call
    remember_request(work, text) -> None                          the request text counts as an echo too
    remember_tool_output(work, messages) -> None                  a scene part copied from tool output is
                                                  dropped and completed from the mind and record
    apply_answer(part, work, text) -> None                        problems and notes land on `work`
    ensure_mission(work) -> None                                  M4: a mission from the record if none
    fit_caps(work, previous_mind) -> None                         M4, M6: every section within its cap
    parts_to_reask(problems, work) -> tuple[str, ...]
    ticked_checklist(candidates, ticked) -> str
    scene_limits(window) -> dict[str, int]                        SCENE_CHARS shrunk to SCENE_FLOOR_CHARS
    SCENE_COMPLETED                                               a note's start: the harness completed a
                                                  scene part the model left too short (S1, S2, S4)
    SCENE_DROPPED                                                 a note's start: the harness dropped a scene
                                                  part (a repeat, filler, an echo, a copy of tool output)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from avibe.checkpoint.memo import Candidate, Label, render_checklist
from avibe.checkpoint.model import Problem
from avibe.checkpoint.structured.answers import APPLY, SCENE_COMPLETED, SCENE_DROPPED, ensure_mission
from avibe.checkpoint.structured.edits import fit_caps
from avibe.checkpoint.structured.groups import GROUPS, Asked, ask, groups
from avibe.checkpoint.structured.groups import apply as apply_group
from avibe.checkpoint.structured.questions import QUESTIONS, notes_due
from avibe.checkpoint.structured.schemas import scene_limits
from avibe.checkpoint.structured.work import (
    MIND_PARTS,
    PARTS,
    SCENE_CHARS,
    SCENE_FLOOR_CHARS,
    SCENE_MIN_CHARS_PER_PART,
    Question,
    Work,
    norm,
    parse,
)
from avibe.record.messages import ChatMessage

__all__ = [
    "GROUPS",
    "MIND_PARTS",
    "PARTS",
    "SCENE_CHARS",
    "SCENE_COMPLETED",
    "SCENE_DROPPED",
    "SCENE_FLOOR_CHARS",
    "SCENE_MIN_CHARS_PER_PART",
    "Asked",
    "Question",
    "Work",
    "apply_answer",
    "apply_group",
    "ask",
    "ensure_mission",
    "fit_caps",
    "groups",
    "notes_due",
    "parts_to_reask",
    "question",
    "remember_request",
    "remember_tool_output",
    "scene_limits",
    "ticked_checklist",
]


def question(part: str, work: Work) -> Question | None:
    """The part's question (None: nothing to ask); remembers its wording to spot echoed answers."""
    asked = QUESTIONS[part](work)
    work.echo = f"{norm(asked.text)} {work.intro}" if asked else ""
    if asked:
        work.asked.append(norm(asked.own_words))
    return asked


def remember_request(work: Work, text: str) -> None:
    """Answers copied from the turn's request text are dropped like those copied from a question."""
    work.intro = norm(text)


def remember_tool_output(work: Work, messages: Sequence[ChatMessage]) -> None:
    """The tool results in the live conversation, which a scene part must not merely copy."""
    work.tool_output = norm(" ".join(m.content for m in messages if m.role == "tool"))


def apply_answer(part: str, work: Work, text: str) -> None:
    data = parse(work, part, text)
    if data is not None:
        APPLY[part](work, data)


def parts_to_reask(problems: Sequence[Problem], work: Work) -> tuple[str, ...]:
    """The questions to ask again: those whose answer failed, and those behind each validation problem
    (any mind problem re-asks all mind questions, since they restart from the previous mind together)."""
    wanted = {p.code.split(".", 1)[1] for p in problems if p.part == "answer"}
    wanted |= {p.part for p in problems if p.part in ("memo", "scene")}
    if wanted & set(MIND_PARTS) or any(p.part in ("mind", "edit") for p in problems):
        wanted |= set(MIND_PARTS)
    return tuple(part for part in PARTS if part in wanted)


def ticked_checklist(candidates: Sequence[Candidate], ticked: frozenset[Label]) -> str:
    """The checklist file as the answers left it (mirrored for inspection, F2)."""
    return render_checklist([replace(c, ticked=c.label in ticked) for c in candidates])
