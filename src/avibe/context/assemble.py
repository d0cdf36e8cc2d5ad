"""The model's view after a checkpoint (F4, F5): system prompt, recollection, recent messages verbatim.

API:
    system_prompt(identity, rules, skill_catalogue, agents_md="", agents_md_heading="") -> str
    recollection(checkpoint, *, number=None, skills=(), files="", pointer="", current_request_seqs=(),
                 plan="", rendering="sections") -> str
    assemble(system: str, recollection: str, recent_messages: Sequence[ChatMessage], memo=())
        -> list[ChatMessage]     with a memo: `reminder` after the newest user message
    RENDERINGS: the ways a recollection can be shown ("sections", the default; "rules-last"; "plain")
    as_rendering(name: str) -> Rendering       one of them by name (ValueError for another)
    (the reminder, its rules and `standing_rules`: context/reminder.py; the quoting: context/quote.py)

The system prompt is rebuilt every turn and never compacted. The checkpoint is rendered as Vibey's own
recollection ("what I remember"), not as new instructions; its memo is the user's own words, each with its
message number, quoted line by line so no memo text can pass for a heading or a source tag (T2).

Renderings change how the same checkpoint is shown, never what it holds: "sections" (the
default) under Markdown headings; "rules-last" the same, with the memo's standing rules restated at the end,
nearest the question; "plain" short prose without headings, for small windows. In every one, each memo item
is quoted whole under its `Message #N:` header, each mission entry is its line as written, a skill's text
is framed line by line, and no line the model or a file wrote reads as a tag or a kept message.

A user's new message that is about one of the memo's standing rules gets those rules' sentences restated
right after it, word for word (context/reminder.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Final, Literal

from avibe.checkpoint.carry import PutBackSkill
from avibe.checkpoint.memo import corrects, later_links
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.context.quote import asked_line, own, quoted
from avibe.context.reminder import standing_rules, with_reminder
from avibe.prompts import fill, render
from avibe.record.messages import ChatMessage
from avibe.record.sources import frame_body

_COMMENT: Final = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BLANK_RUNS: Final = re.compile(r"\n{3,}")

Rendering = Literal["sections", "rules-last", "plain"]
RENDERINGS: Final[tuple[Rendering, ...]] = ("sections", "rules-last", "plain")
DEFAULT_RENDERING: Final[Rendering] = "sections"
_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SCENE_TAGS: Final = frozenset({"<checkpoint>", "</checkpoint>"})


def as_rendering(name: str) -> Rendering:
    """A rendering by name (the settings' `recollection`); ValueError for a name that is not one."""
    for rendering in RENDERINGS:
        if rendering == name:
            return rendering
    raise ValueError(f"unknown recollection rendering {name!r}; choose from {', '.join(RENDERINGS)}")


def system_prompt(
    identity: str, rules: str, skill_catalogue: str, agents_md: str = "", agents_md_heading: str = ""
) -> str:
    """F4 (1): identity, rules, skill catalogue and the user's AGENTS.md - rebuilt every turn. An
    AGENTS.md the agent left has its own heading (never shown as the user's words)."""
    heading = agents_md_heading.strip() or fill("agents_md_user")
    agents = (
        "\n" + fill("agents_md", heading=heading, agents_md=agents_md.strip()) if agents_md.strip() else ""
    )
    return render(
        "system_prompt",
        identity=identity.strip(),
        rules=rules.strip(),
        catalogue=skill_catalogue.strip() or "(no skills installed)",
        agents=agents,
    )


def _memo(items: Sequence[MemoItem], between: str = "\n\n", memo: Sequence[MemoItem] | None = None) -> str:
    """The kept messages quoted under their headers; `memo`: the whole memo, when `items` restate a part
    of it (rules-last), so a header's note is the same wherever the message is shown."""
    if not items:
        return "(none kept)"
    whole = memo or items
    corrected = _corrections(whole)
    spoken = later_links(whole) - corrected
    held = {item.seq for item in whole}
    return between.join(
        f"{_header(item.seq, corrected)}{_later_note(item.seq, spoken, held)}:\n"
        f"{asked_line(item)}{quoted(item.text)}"
        for item in items
    )


def _corrections(memo: Sequence[MemoItem]) -> set[tuple[int, int]]:
    """(earlier, later) for each kept message a later kept one corrects or takes back (`corrects`),
    each pair tested once."""
    return {
        (first.seq, then.seq)
        for first in memo
        for then in memo
        if first.seq < then.seq and corrects(first.text, then.text)
    }


def _header(seq: int, links: set[tuple[int, int]]) -> str:
    """`Message #12`, and where the user corrected or took back a kept message in a later one that is
    kept too, a note in both headers that says which: a small model shown both in order answered with
    the first. The messages themselves stay word for word."""
    later = _numbers(b for a, b in links if a == seq)
    earlier = _numbers(a for a, b in links if b == seq)
    notes = [f"the user changed this later, in {later}"] if later else []
    notes += [f"this changes {earlier}"] if earlier else []
    return f"Message #{seq}" + (f" ({'; '.join(notes)})" if notes else "")


def _later_note(seq: int, links: set[tuple[int, int]], held: Collection[int]) -> str:
    """A kept rule's later words about the same thing, whatever their wording (`later_links`, N3): a
    short note after its header - " (changed later: #15)", kept after it; " (changed later: #15, in the
    conversation below)", still there - so it is never shown as simply in force. Short, because on a
    small window every token of the recollection is room the work lacks."""
    later = sorted({b for a, b in links if a == seq})
    kept = ", ".join(f"#{b}" for b in later if b in held)
    below = ", ".join(f"#{b}" for b in later if b not in held)
    notes = [kept] if kept else []
    notes += [f"{below}, in the conversation below"] if below else []
    return f" (changed later: {'; '.join(notes)})" if notes else ""


def _numbers(seqs: Iterable[int]) -> str:
    """ "message #12" / "messages #12 and #15": the numbers once each, in order."""
    numbers = [f"#{seq}" for seq in sorted(set(seqs))]
    if len(numbers) < 2:
        return f"message {numbers[0]}" if numbers else ""
    return f"messages {', '.join(numbers[:-1])} and {numbers[-1]}"


def _mind(mind: str) -> str:
    """The mind without its template guidance comments (they are instructions for the checkpoint turn)."""
    return _BLANK_RUNS.sub("\n\n", _COMMENT.sub("", mind)).strip()


def _lead(text: str) -> str:
    """A piece of the recollection with its own heading line (`## Files`) as a lead-in (`Files:`)."""
    first, sep, rest = text.partition("\n")
    heading = _HEADING.match(first)
    return f"{heading.group(2)}:{sep}{rest}" if heading else text


def _plain_mind(mind: str) -> str:
    """The mind without headings, for "plain": each heading a lead-in (`Mission:`), a heading over nothing
    left out, blank lines dropped; every other line as written (mission entries whole)."""
    lines = [line for line in _mind(mind).splitlines() if line.strip()]
    kept: list[str] = []
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading is None:
            kept.append(line)
            continue
        level = len(heading.group(1))
        below = []  # the section's lines, up to the next heading of its level or above
        for after in lines[i + 1 :]:
            over = _HEADING.match(after)
            if over and len(over.group(1)) <= level:
                break
            below.append(over is None)
        if any(below):
            kept.append(f"{heading.group(2)}:")
    return "\n".join(kept)


def _plain_scene(scene: str) -> str:
    """The scene as written, without the checkpoint block's tag lines."""
    return "\n".join(line for line in scene.strip().splitlines() if line.strip() not in _SCENE_TAGS)


def _skills(skills: Sequence[PutBackSkill], lead: bool = False) -> str:
    """Each skill's text framed: a skill file is not the user's and may be written in the workdir, so no
    line of it may pass for a heading, a kept message or a tag of the recollection."""
    if not skills:
        return ""
    shown = _lead if lead else str
    parts = [
        shown(
            fill(
                "recollection_skill",
                name=s.name,
                cut=", cut" if s.cut else "",
                text=frame_body(s.text.strip()),
            )
        )
        for s in skills
    ]
    return "\n" + shown(fill("recollection_skills", skills="\n\n".join(parts))) + "\n"


def _current(seqs: Sequence[int]) -> str:
    if not seqs:
        return ""
    numbers = ", ".join(f"#{seq}" for seq in sorted(set(seqs)))
    return "\n" + render("current_request", seqs=numbers)


def _rules_last(memo: Sequence[MemoItem]) -> str:
    rules = standing_rules(memo)
    return "\n" + fill("recollection_rules", memo=_memo(rules, memo=memo)) + "\n" if rules else ""


def recollection(
    checkpoint: Checkpoint,
    *,
    number: int | None = None,
    skills: Sequence[PutBackSkill] = (),
    files: str = "",
    pointer: str = "",
    current_request_seqs: Sequence[int] = (),
    plan: str = "",
    rendering: Rendering = DEFAULT_RENDERING,
) -> str:
    """F4 (2), F5: the checkpoint as Vibey's own recollection, with what it carries (A1-A3) and the
    agent's plan, verbatim, shown in one of the RENDERINGS (ValueError
    for another).

    `current_request_seqs`: the record numbers of the current turn's user messages when the checkpoint
    came mid-turn (F5); they stay verbatim in the recent messages and win where they disagree.
    """
    plain = as_rendering(rendering) == "plain"
    shown = _lead if plain else str  # "plain" shows each carried part's heading as a lead-in

    def part(text: str) -> str:
        return "\n" + shown(text) + "\n"

    number_text = f" (checkpoint {number})" if number is not None else ""
    memo = _memo(checkpoint.memo, "\n" if plain else "\n\n")
    plan_text = part(fill("recollection_plan", plan=own(plan.strip()))) if plan.strip() else ""
    current = "\n" + shown(_current(current_request_seqs).lstrip("\n")) if current_request_seqs else ""
    files_text = part(fill("recollection_files", files=own(files.strip()))) if files.strip() else ""
    record = part(fill("recollection_record", pointer=pointer.strip())) if pointer.strip() else ""
    if plain:
        return render(
            "recollection_plain",
            number=number_text,
            mind=own(_plain_mind(checkpoint.mind)),
            memo=memo,
            scene=own(_plain_scene(checkpoint.scene)),
            plan=plan_text,
            current=current,
            skills=_skills(skills, lead=True),
            files=files_text,
            pointer=record,
        )
    return render(
        "recollection",
        number=number_text,
        mind=own(_mind(checkpoint.mind)),
        memo=memo,
        scene=own(checkpoint.scene.strip()),
        plan=plan_text,
        current=current,
        skills=_skills(skills),
        files=files_text,
        pointer=record,
        rules=_rules_last(checkpoint.memo) if rendering == "rules-last" else "",
    )


def assemble(
    system: str,
    recollection: str,
    recent_messages: Sequence[ChatMessage],
    memo: Sequence[MemoItem] = (),
) -> list[ChatMessage]:
    """F4: the system prompt, then the recollection as a second system message (when there is one), then
    the recent messages verbatim and in order - with the `reminder` of the memo's rules right after the
    newest user message, when it is about one."""
    view = [ChatMessage(role="system", content=system)]
    if recollection.strip():
        view.append(ChatMessage(role="system", content=recollection))
    view.extend(with_reminder(recent_messages, memo))
    return view
