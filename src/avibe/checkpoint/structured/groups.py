"""The structured questions asked in calls: one question a call ("structured", for the 0.5B), the mind's
questions together ("three": the memo, the mind, the scene - at most three calls), or the mind's and the
scene's questions together in one call ("grouped").

Every call re-reads the whole conversation (its prompt tokens count, cached or not) and its question and
schema uncached; a model that can answer several small questions at once saves calls. Grouped, a turn
asks the memo question (with the mission gate, M4) in one call, and the mission (when the gate or a
missing mission asks for it), workstreams, notes and scene questions in the next: two calls, or one
when no user message moves out, where one question a call asks up to five. The room question (M3) stays
a call of its own: it asks about what the answers before it left out.

Each question is built as it would be alone, and each part's answer is applied by the same code as alone
(`answers.APPLY`), in PARTS order: a grouped call changes how many calls are made, never what an answer
does. The parts' keys are distinct but for "retire" (workstreams and notes), which is renamed per part in
the call ("retire_workstreams", "retire_notes") and back before it applies. A question not due (None) is
left out of its group, and a group with no question is no call.

API:
    GROUPS: dict[str, tuple[tuple[str, ...], ...]]   mode -> the parts asked together, call by call
    groups(mode, parts) -> tuple[tuple[str, ...], ...]   the mode's groups, only with `parts` (repair)
    Asked(parts, question, keys)                      one call: its parts and how its keys map to theirs
    ask(parts, work) -> Asked | None                  None: no part of the group has a question now
    apply(asked, work, text) -> None                  each part's answer applied, problems on `work`
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from avibe.checkpoint.structured.answers import APPLY, ensure_mission
from avibe.checkpoint.structured.questions import QUESTIONS
from avibe.checkpoint.structured.schemas import object_schema
from avibe.checkpoint.structured.work import (
    CHARS_PER_TOKEN,
    LINE_TOKENS,
    PARTS,
    Question,
    Work,
    norm,
    parse,
)
from avibe.prompts import render

GROUPS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "structured": tuple((part,) for part in PARTS),
    # the scene alone: asked with the mind's questions the 0.5B wrote "current_step is not set yet"
    "three": (("memo",), ("mission", "workstreams", "notes"), ("scene",), ("room",)),
    "grouped": (("memo",), ("mission", "workstreams", "notes", "scene"), ("room",)),
}
_ANSWER_LINE: Final = "Answer with JSON only"  # each question's own last line; one line ends a group
MARKUP_TOKENS: Final = 3 * LINE_TOKENS  # a new mission line's "- [M2] (active) (from #13) "


@dataclass(frozen=True, slots=True)
class Asked:
    parts: tuple[str, ...]  # the parts with a question in this call, in PARTS order
    question: Question
    keys: dict[str, dict[str, str]]  # part -> {key in the call's answer: key in the part's own answer}


def groups(mode: str, parts: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """The mode's groups holding only `parts` (the questions a repair asks again), none empty."""
    kept = (tuple(part for part in group if part in parts) for group in GROUPS[mode])
    return tuple(group for group in kept if group)


def ask(parts: Sequence[str], work: Work) -> Asked | None:
    """The call asking every part of `parts` that has a question now; remembers its wording, so an
    answer that only copies it is dropped (`work.clean`)."""
    asked: list[tuple[str, Question]] = []
    for part in parts:
        question = QUESTIONS[part](work)
        if question is not None:
            asked.append((part, question))
            _reserve(work, part, question)
    work.reserved = {}
    if not asked:
        work.echo = ""
        return None
    work.asked.append(norm("\n".join(question.own_words for _, question in asked)))
    if len(asked) == 1:
        part, question = asked[0]
        work.echo = f"{norm(question.text)} {work.intro}"
        return Asked((part,), question, {part: {key: key for key in question.schema["properties"]}})
    shared = Counter(key for _, q in asked for key in q.schema["properties"])
    texts: list[str] = []
    properties: dict[str, Any] = {}
    keys: dict[str, dict[str, str]] = {}
    for part, question in asked:
        text, keys[part] = question.text, {}
        for key, schema in question.schema["properties"].items():
            name = f"{key}_{part}" if shared[key] > 1 else key
            if name != key:
                text = text.replace(f'"{key}"', f'"{name}"')
            keys[part][name] = key
            properties[name] = schema
        lines = [line for line in text.strip().split("\n") if not line.startswith(_ANSWER_LINE)]
        texts.append("\n".join(lines))
    text = "\n\n".join([*texts, render("q_together").strip()])
    work.echo = f"{norm(text)} {work.intro}"
    part_names = tuple(part for part, _ in asked)
    return Asked(part_names, Question("+".join(part_names), text, object_schema(properties)), keys)


def _reserve(work: Work, part: str, question: Question) -> None:
    """Asked one a call, the workstreams question is sized after the mission's answer took its room in
    Goals; asked together, it is sized as if the longest new mission entry the grammar allows were there
    already (M6: the answers together then stay within the cap, and no room question follows for it)."""
    new = question.schema["properties"].get("new") if part == "mission" else None
    if new:
        line = MARKUP_TOKENS + new["items"]["maxLength"] // CHARS_PER_TOKEN
        work.reserved["Goals"] = work.reserved.get("Goals", 0) + new["maxItems"] * line


def apply(asked: Asked, work: Work, text: str) -> None:
    """Each part's share of the answer, applied as that part's own answer would be (M4: a mission is
    ensured right after the mission part, as alone). Any mind part's problem re-asks every mind part
    (`parts_to_reask`), so an unreadable answer is noted once, on the first part."""
    data = parse(work, asked.parts[0], text)  # unreadable: a problem of the first part; validation
    if data is None:  # then finds what the others left undone (an empty scene, V1), and all are re-asked
        return
    for part in asked.parts:
        APPLY[part](work, {key: data[name] for name, key in asked.keys[part].items() if name in data})
        if part == "mission":
            ensure_mission(work)
