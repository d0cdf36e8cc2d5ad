"""The model's view after a checkpoint (F4, F5): system prompt, recollection, recent messages verbatim.

API:
    system_prompt(identity, rules, skill_catalogue, agents_md="", agents_md_heading="") -> str
    recollection(checkpoint, *, number=None, skills=(), files="", pointer="", current_request_seqs=()) -> str
    assemble(system: str, recollection: str, recent_messages: Sequence[ChatMessage]) -> list[ChatMessage]

The system prompt is rebuilt every turn and never compacted. The checkpoint is rendered as Vibey's own
recollection ("what I remember"), not as new instructions; its memo is the user's own words, each with its
message number, quoted line by line so no memo text can pass for a heading or a source tag (T2).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Final

from avibe.checkpoint.carry import PutBackSkill
from avibe.checkpoint.model import Checkpoint, MemoItem
from avibe.prompts import fill, render
from avibe.record.messages import ChatMessage
from avibe.record.sources import frame_body, label_tag_lines, looks_like_tag

_COMMENT: Final = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_BLANK_RUNS: Final = re.compile(r"\n{3,}")
# The memo's heading and an entry's header (`Message #12:`), behind any decoration, after NFKC + casefold.
_MEMO_LIKE: Final = re.compile(r"[\W_]*(?:message\W*\d|the user\W*s (?:own )?words)")


def system_prompt(
    identity: str, rules: str, skill_catalogue: str, agents_md: str = "", agents_md_heading: str = ""
) -> str:
    """F4 (1): identity, rules, skill catalogue and the user's AGENTS.md - rebuilt every turn. An
    AGENTS.md the agent left has its own heading (issue 27 item 7: never shown as the user's words)."""
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


def _quoted_line(line: str) -> str:
    """One memo line as a quote; a line a model could read as a source tag gets "user:" in front (T2)."""
    if not line:
        return ">"
    return f"> user: {line}" if looks_like_tag(line) else f"> {line}"


def _quoted(text: str) -> str:
    """Every line quoted - lines broken wherever any reader breaks them (U+2028 too), so no line of a
    kept message starts outside its quote."""
    return "\n".join(_quoted_line(line) for line in text.splitlines() or [""])


def _reads_like_memo(line: str) -> bool:
    """Whether a line reads like the recollection's own memo parts: its heading or an entry's header."""
    return bool(_MEMO_LIKE.match(unicodedata.normalize("NFKC", line).casefold()))


def _own(text: str) -> str:
    """The mind, scene, plan and file list are the model's (or its workdir's) words: a line of them that
    reads like a source tag (a small model copies a callback's tag line into its scene) or like a kept
    message of the user (`Message #12:`) gets "vibey:" in front, so the recollection never shows a tag
    or a user's message that Avibe did not write (T1, T2)."""
    lines = label_tag_lines(text, "vibey").splitlines(keepends=True)
    return "".join(f"vibey: {line}" if _reads_like_memo(line) else line for line in lines)


def _memo(items: Sequence[MemoItem]) -> str:
    if not items:
        return "(none kept)"
    return "\n\n".join(f"Message #{item.seq}:\n{_quoted(item.text)}" for item in items)


def _mind(mind: str) -> str:
    """The mind without its template guidance comments (they are instructions for the checkpoint turn)."""
    return _BLANK_RUNS.sub("\n\n", _COMMENT.sub("", mind)).strip()


def _skills(skills: Sequence[PutBackSkill]) -> str:
    """Each skill's text framed: a skill file is not the user's and may be written in the workdir, so no
    line of it may pass for a heading, a kept message or a tag of the recollection."""
    if not skills:
        return ""
    parts = [
        fill("recollection_skill", name=s.name, cut=", cut" if s.cut else "", text=frame_body(s.text.strip()))
        for s in skills
    ]
    return "\n" + fill("recollection_skills", skills="\n\n".join(parts)) + "\n"


def _current(seqs: Sequence[int]) -> str:
    if not seqs:
        return ""
    numbers = ", ".join(f"#{seq}" for seq in sorted(set(seqs)))
    return "\n" + render("current_request", seqs=numbers)


def recollection(
    checkpoint: Checkpoint,
    *,
    number: int | None = None,
    skills: Sequence[PutBackSkill] = (),
    files: str = "",
    pointer: str = "",
    current_request_seqs: Sequence[int] = (),
    plan: str = "",
) -> str:
    """F4 (2), F5: the checkpoint as Vibey's own recollection, with what it carries (A1-A3) and the
    agent's plan, verbatim (issue 16 item 5).

    `current_request_seqs`: the record numbers of the current turn's user messages when the checkpoint
    came mid-turn (F5); they stay verbatim in the recent messages and win where they disagree.
    """
    return render(
        "recollection",
        number=f" (checkpoint {number})" if number is not None else "",
        mind=_own(_mind(checkpoint.mind)),
        memo=_memo(checkpoint.memo),
        scene=_own(checkpoint.scene.strip()),
        plan="\n" + fill("recollection_plan", plan=_own(plan.strip())) + "\n" if plan.strip() else "",
        current=_current(current_request_seqs),
        skills=_skills(skills),
        files="\n" + fill("recollection_files", files=_own(files.strip())) + "\n" if files.strip() else "",
        pointer="\n" + fill("recollection_record", pointer=pointer.strip()) + "\n" if pointer.strip() else "",
    )


def assemble(system: str, recollection: str, recent_messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """F4: the system prompt, then the recollection as a second system message (when there is one), then
    the recent messages verbatim and in order."""
    view = [ChatMessage(role="system", content=system)]
    if recollection.strip():
        view.append(ChatMessage(role="system", content=recollection))
    view.extend(recent_messages)
    return view
