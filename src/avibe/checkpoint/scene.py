"""The scene: the working state, rewritten at every checkpoint as exactly one block (S1-S6, V1).

API:
    OPEN_TAG = "<checkpoint>";  CLOSE_TAG = "</checkpoint>"
    SCENE_LABELS: tuple[str, ...]   "Current step", "Progress", "Waiting for", "Next step", "Pitfalls",
                                    "Exact references"   (S1-S6, in this order)
    SCENE_MIN_CHARS = 200           minimum length of the block's inside, stripped (V1)
    SceneParts(current_step, progress, waiting_for, next_step, pitfalls, exact_references: str)
        .as_dict() -> dict[str, str]   label -> text
    SCENE_TEMPLATE: str             an example block with guidance for each part
    render_scene(parts: SceneParts) -> str
    scene_blocks(text: str) -> list[str]                  inner text of every complete block
    parse_scene(text: str) -> SceneParts | list[Problem]  every problem at once; never raises
        (also refuses a part left as the template's example text)
    quote_request(seq: int, text: str) -> str             'the user's latest request (#12): "..."' (S4)
    harness_scene(next_step=HARNESS_NEXT) -> str         the scene the harness writes when none was (V7)
    with_latest_request(scene: str, seq: int, text: str) -> str
        the scene with its next step quoting the user's latest request, when it does not already (S4)

A part starts on a line "<Label>: text" (also "**Label:**", "- Label:", "## Label") and runs to the next
label. Text outside the block is ignored. An empty part must say "none".

Why 200 characters: the six labels with "none" in every part take about 100 characters, so a block that
passes has at least ~100 characters of real state - one line for the current step and one quoting the
user's latest request. A weak model can write that; a block shorter than that cannot hold S1 and S4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Final

from avibe.checkpoint.model import Problem
from avibe.prompts import render

OPEN_TAG: Final = "<checkpoint>"
CLOSE_TAG: Final = "</checkpoint>"
SCENE_LABELS: Final[tuple[str, ...]] = (
    "Current step",
    "Progress",
    "Waiting for",
    "Next step",
    "Pitfalls",
    "Exact references",
)
SCENE_MIN_CHARS: Final = 200

_LABEL_ALTERNATIVES = "|".join(re.escape(label) for label in SCENE_LABELS)
_LABEL_LINE = re.compile(
    rf"^[ \t]*(?:[-*#]+[ \t]*)?(?:\*\*)?({_LABEL_ALTERNATIVES})(?:\*\*)?[ \t]*(?::(?:\*\*)?[ \t]*(.*)|$)",
    re.IGNORECASE,
)
_TAG = re.compile(r"<(/?)checkpoint\s*>", re.IGNORECASE)

SCENE_TEMPLATE: Final = render("scene_template", open=OPEN_TAG, close=CLOSE_TAG)


@dataclass(frozen=True, slots=True)
class SceneParts:
    current_step: str
    progress: str
    waiting_for: str
    next_step: str
    pitfalls: str
    exact_references: str

    def as_dict(self) -> dict[str, str]:
        values = [getattr(self, f.name) for f in fields(self)]
        return dict(zip(SCENE_LABELS, values, strict=True))


def render_scene(parts: SceneParts) -> str:
    """The one scene block, parts in their fixed order (S1-S6)."""
    body = "\n".join(f"{label}: {text.strip() or 'none'}" for label, text in parts.as_dict().items())
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}\n"


def scene_blocks(text: str) -> list[str]:
    """The inner text of every complete <checkpoint> ... </checkpoint> block, in order."""
    blocks: list[str] = []
    start: int | None = None
    for tag in _TAG.finditer(text):
        if not tag.group(1):
            start = tag.end()
        elif start is not None:
            blocks.append(text[start : tag.start()])
            start = None
    return blocks


def _tag_problems(text: str, blocks: list[str]) -> list[Problem]:
    opened = sum(1 for tag in _TAG.finditer(text) if not tag.group(1))
    if len(blocks) > 1 or opened > 1:
        count = max(len(blocks), opened)
        message = f"There are {count} {OPEN_TAG} blocks. Write exactly one {OPEN_TAG} ... {CLOSE_TAG} block."
        return [Problem("scene.block_count", message)]
    if not blocks:
        hint = f"; it is opened but never closed with {CLOSE_TAG}" if opened else ""
        message = (
            f"The scene has no complete {OPEN_TAG} ... {CLOSE_TAG} block{hint}. Write one block with the "
            f"six parts: {', '.join(SCENE_LABELS)}."
        )
        return [Problem("scene.block_count", message)]
    return []


def _split_parts(block: str) -> tuple[dict[str, list[str]], list[Problem]]:
    parts: dict[str, list[str]] = {}
    problems: list[Problem] = []
    current: str | None = None
    for line in block.splitlines():
        match = _LABEL_LINE.match(line)
        if match:
            current = next(label for label in SCENE_LABELS if label.lower() == match.group(1).lower())
            if current in parts:
                problems.append(
                    Problem("scene.part_repeated", f"'{current}:' appears twice; merge into one.")
                )
            parts.setdefault(current, []).append(match.group(2) or "")
        elif current is not None:
            parts[current].append(line)
    return parts, problems


def _part_problems(parts: dict[str, list[str]]) -> list[Problem]:
    problems = []
    for label in SCENE_LABELS:
        if label not in parts:
            problems.append(
                Problem(
                    "scene.part_missing",
                    f"The scene has no '{label}:' part. Add a line "
                    f"'{label}: ...' (write '{label}: none' if there is nothing).",
                )
            )
        elif not "\n".join(parts[label]).strip():
            problems.append(
                Problem("scene.part_empty", f"'{label}:' is empty. Fill it in, or write '{label}: none'.")
            )
    return problems


def _template_problems(parts: dict[str, list[str]]) -> list[Problem]:
    """A part copied unchanged from SCENE_TEMPLATE holds no state."""
    template = scene_blocks(SCENE_TEMPLATE)[0]
    example, _ = _split_parts(template)
    copied = [label for label in SCENE_LABELS if label in parts and parts[label] == example[label]]
    return [
        Problem("scene.template_text", f"'{label}:' still holds the example text; write the real state.")
        for label in copied
    ]


def parse_scene(text: str) -> SceneParts | list[Problem]:
    """The six parts of the one scene block, or every problem found (V1)."""
    blocks = scene_blocks(text)
    problems = _tag_problems(text, blocks)
    if problems:
        return problems
    block = blocks[0]
    parts, problems = _split_parts(block)
    problems += _part_problems(parts) + _template_problems(parts)
    if len(block.strip()) < SCENE_MIN_CHARS:
        problems.append(
            Problem(
                "scene.too_short",
                f"The scene block has {len(block.strip())} characters; it "
                f"needs at least {SCENE_MIN_CHARS}. Say more about the current step, the "
                "next step (quote the user) and the exact references.",
            )
        )
    if problems:
        return problems
    return SceneParts(*("\n".join(parts[label]).strip() for label in SCENE_LABELS))


REQUEST_CHARS: Final = 300  # the latest request quoted in a harness-written next step, at most this long
HARNESS_SCENE: Final = (
    "Current step: unknown - older messages were moved out without a checkpoint (model-free move-out).\n"
    "Progress: see the record.\nWaiting for: none known.\nNext step: {next}\n"
    "Pitfalls: none recorded.\nExact references: the record holds every moved-out message."
)


HARNESS_NEXT: Final = "continue with the user's latest request (see the memo and recent messages)."


def harness_scene(next_step: str = HARNESS_NEXT) -> str:
    """The scene the harness writes when no model ever wrote one: only what it knows (V7)."""
    return f"{OPEN_TAG}\n{HARNESS_SCENE.format(next=next_step)}\n{CLOSE_TAG}\n"


def _defused(tag: re.Match[str]) -> str:
    return tag.group(0).replace("<", "\u2039").replace(">", "\u203a")


def quote_request(seq: int, text: str) -> str:
    """S4: the user's latest request, quoted verbatim (its first REQUEST_CHARS characters, on one line; a
    block tag inside it defused, so the quote cannot end the scene's block)."""
    words = _TAG.sub(_defused, " ".join(text.split()))
    quoted = words if len(words) <= REQUEST_CHARS else words[: REQUEST_CHARS - 3].rstrip() + "..."
    return f'the user\'s latest request (message #{seq}): "{quoted}"'


def with_latest_request(scene: str, seq: int, text: str) -> str:
    """S4 for a scene the harness keeps without the model (V7): a scene whose next step already quotes the
    latest request is kept as it is; one written before that request came keeps every part and gets a
    next step quoting it, the old one after it as what was next before; no scene (or one that does not
    parse) gets the harness's own, which claims nothing the model did not write."""
    words = " ".join(text.split())
    if not scene.strip():
        return harness_scene(quote_request(seq, text))
    parts = parse_scene(scene)
    if isinstance(parts, list):  # not a scene it can place the request in: kept, the model's words
        return scene
    said = " ".join(parts.next_step.split())
    if words and (words in said or words[: REQUEST_CHARS - 3].rstrip() in said):
        return scene
    unknown = not said or said.lower() == "none" or said == HARNESS_NEXT
    before = "" if unknown else f" (before it, the next step was: {said})"
    return render_scene(replace(parts, next_step=quote_request(seq, text) + before))
