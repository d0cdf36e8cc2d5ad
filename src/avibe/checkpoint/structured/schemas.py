"""JSON schemas for the structured questions, sized so the grammar itself keeps answers within the caps.

llama.cpp turns each schema into a grammar: a length limit here is a limit the model cannot pass, so the
limits follow the mind's section caps (M6) and the window (the scene's parts).

API:
    array(items, max_items=MAX_NEW) -> dict         object_schema(properties) -> dict (all required)
    text(limit=ENTRY_CHARS) -> dict                 a string of at most `limit` characters
    room_chars(work, section, entries, *, replaced="") -> int   characters per new line that still fit
    sized_array(item, chars, max_items=MAX_NEW) -> dict         no items when there is no useful room
    scene_limits(window) -> dict[str, int]          each scene part's character limit for this window
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avibe.checkpoint.mind import section_texts, strip_guidance
from avibe.checkpoint.structured.work import (
    CHARS_PER_TOKEN,
    ENTRY_CHARS,
    LINE_TOKENS,
    MAX_NEW,
    MIN_ENTRY_CHARS,
    SCENE_CHARS,
    SCENE_FLOOR_CHARS,
    SCENE_REFERENCE_WINDOW,
    Work,
)


def array(items: Mapping[str, Any], max_items: int = MAX_NEW) -> dict[str, Any]:
    return {"type": "array", "items": dict(items), "maxItems": max_items}


def object_schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def text(limit: int = ENTRY_CHARS) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit}


def room_chars(work: Work, section: str, entries: int, *, replaced: str = "") -> int:
    """The most characters each of `entries` new lines of a mind section may have, so that all of them
    together still fit the section's cap (M6): the grammar then makes an over-cap answer impossible.
    `replaced` is text the answer replaces (lines it rewrites), freed for the new ones; `work.reserved`
    is what an answer to a question asked in the same call may add to the section first."""
    if work.counter is None:
        return ENTRY_CHARS
    body = strip_guidance(section_texts(work.mind).get(section, ""))
    used = work.counter.count(body) - (work.counter.count(replaced) if replaced else 0)
    used += work.reserved.get(section, 0)
    room = work.budgets.mind_cap(section) - used - LINE_TOKENS * entries
    return max(0, room * CHARS_PER_TOKEN // max(entries, 1))


def sized_array(item: dict[str, Any], chars: int, max_items: int = MAX_NEW) -> dict[str, Any]:
    """An array of at most `max_items` items, none allowed when there is no room for a useful line."""
    return array(item, max_items if chars >= MIN_ENTRY_CHARS else 0)


def scene_limits(window: int) -> dict[str, int]:
    """Each scene part's character limit for this window (see SCENE_REFERENCE_WINDOW)."""
    share = min(1.0, window / SCENE_REFERENCE_WINDOW)
    return {name: max(SCENE_FLOOR_CHARS[name], int(limit * share)) for name, limit in SCENE_CHARS.items()}
