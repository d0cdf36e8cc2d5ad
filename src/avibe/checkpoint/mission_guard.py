"""M4 "the mission changes only when the user explicitly changes it": the guard a checkpoint's new mind
passes before it is accepted (checkpoint/turn_state.py).

API:
    cited_messages(line: str) -> set[int]                   the "#N" message numbers a line cites
    guard_new_missions(previous, mind, allowed) -> (mind, notes)   a new mission entry cites a user
                                                            message since the last checkpoint (allowed:
                                                            number -> text) in its words, or goes; an
                                                            active entry's status changes only with one
    says_it_ends(text: str) -> bool                         a user message says outright a purpose ends
    words_from(line, cited, mission) -> bool                a new entry's words are the cited messages'
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Final

from avibe.checkpoint.memo import sentences
from avibe.checkpoint.mind import MISSION_LINE, PER_REASON, REPLACED_BY, mission_lines, short

_CITED = re.compile(r"#(\d+)")


def cited_messages(line: str) -> set[int]:
    """The message numbers a mission line cites ("(from #12)", "message #12")."""
    return {int(n) for n in _CITED.findall(line)}


def guard_new_missions(previous: str, mind: str, allowed: Mapping[int, str]) -> tuple[str, tuple[str, ...]]:
    """M4: "the mission changes only when the user explicitly changes it". Once a mission exists:
    - a new entry (an id the previous mind lacks) stays only when it cites a message in `allowed` - the
      user's messages since the last checkpoint, number -> text - and its words are mostly that
      message's (the demo's 1.5B filed a copy of M1's text as a new entry "from" "Continue with the next
      ticket."); any other is taken out, and an entry marked "replaced by" it gets its previous line back;
    - an entry that was active and is now done, withdrawn or replaced keeps that status only when it is
      replaced by a new entry that stayed, or its line newly cites a message in `allowed` that says it
      ends, is withdrawn or replaced (the demo's 1.5B marked the whole job done, with five of six
      tickets left, "per" "Next ticket, please."); otherwise its previous line returns.
    Entries of the previous mind are never taken out (never fewer, V2). Returns the mind and a note for
    each change undone (the turn's notes: logged and shown with the checkpoint)."""
    before, now = mission_lines(previous), mission_lines(mind)
    if not before:  # the first mission is set, not changed: the user's purpose, as the model read it
        return _first_mission_active(mind, now, allowed)
    numbers = _cites(allowed) or "none"
    notes: list[str] = []
    dropped: list[str] = []
    for mid, line in now.items():
        if mid in before:
            continue
        cited = cited_messages(line) & set(allowed)
        if not cited:
            why = f"it cites no user message since the last checkpoint ({numbers})"
        elif not words_from(line, [allowed[n] for n in cited], "\n".join(before.values())):
            why = "its words are not those of the user's message it cites (" + _cites(cited) + ")"
        else:
            continue
        notes.append(f"mission entry {mid} dropped (M4): {why}: {short(line, 120)}")
        dropped.append(mid)
        mind = _without_line(mind, line)
    for mid, line in mission_lines(mind).items():
        old = before.get(mid)
        if old is None or line == old or _status(old) != "active" or _status(line) == "active":
            continue
        target = REPLACED_BY.match(_status(line))
        by = target.group(1).upper() if target else ""
        if by in dropped:
            why = "what replaced it was dropped"
        elif by and by not in before:
            continue  # replaced by a new entry that stayed: that entry cites the user's message
        else:
            cited = (cited_messages(line) - cited_messages(old)) & set(allowed)
            said = [allowed[n] for n in sorted(cited)]
            if cited and (by or any(says_it_ends(text) for text in said)):
                continue
            why = (
                f"the message it cites ({_cites(cited)}) does not end or withdraw it"
                if cited
                else "no user message since the last checkpoint is cited"
            )
        mind = mind.replace(line, old, 1)
        notes.append(f"mission entry {mid} keeps its status (M4): {why}")
    return mind, tuple(notes)


def _first_mission_active(
    mind: str, lines: Mapping[str, str], allowed: Mapping[int, str]
) -> tuple[str, tuple[str, ...]]:
    """The first mission's entries start active: one set done or withdrawn stays so only per a user message
    it cites that says so (the 1.5B's first mission was "(done) (per #6)", a message of reporting rules)."""
    notes: list[str] = []
    for mid, line in lines.items():
        status = _status(line)
        if status in ("active", "") or REPLACED_BY.match(status):
            continue
        cited = cited_messages(line) & set(allowed)
        if any(says_it_ends(allowed[n]) for n in cited):
            continue
        match = MISSION_LINE.match(line)
        rest = PER_REASON.sub("", match.group(3) if match else "", count=1)
        mind = mind.replace(line, f"- [{mid}] (active) {rest}".rstrip(), 1)
        notes.append(f"mission entry {mid} starts active (M4): no user message it cites ends it")
    return mind, tuple(notes)


# A user message that ends or withdraws a purpose says so. The demo's 1.5B marked the whole job done
# "per" "Next ticket, please." A phrasing missed here leaves the entry active: the side that keeps more.
_ENDS: Final = re.compile(
    r"\b(done|finished|finish|complete|completed|that's all|that is all|enough|stop|stopped|cancel\w*|"
    r"drop|dropped|abandon\w*|forget|never ?mind|no longer|withdraw\w*|scrap\w*|wrap(ped)? up|"
    r"instead(?! of)|replace\w*|don't need|do not need|not needed)\b",
    re.IGNORECASE,
)


# A rule for later is not an ending: the 1.5B marked a whole ticket queue done "per" a message of reporting
# rules ("If you find a bug outside the ticket, add a new ticket for it instead of fixing it").
_CONDITIONAL: Final = re.compile(
    r"\b(if|when|whenever|once|until|unless|before|after|each time|every time)\b", re.IGNORECASE
)
_NEGATED: Final = re.compile(r"(\b(not|never|no)|n't)\W+(\w+\W+){0,2}$", re.IGNORECASE)  # "don't stop"


def says_it_ends(text: str) -> bool:
    """Whether a user message says outright that a purpose ends or is withdrawn: one of its sentences has
    an ending word ("done", "stop", "forget", "instead" ...) that is neither negated ("Don't stop") nor in
    a conditional ("When a ticket is done, commit it"); "instead of" contrasts, it withdraws nothing."""
    for start, end in sentences(text):
        sentence = text[start:end]
        if _CONDITIONAL.search(sentence):
            continue
        if any(not _NEGATED.search(sentence[: m.start()]) for m in _ENDS.finditer(sentence)):
            return True
    return False


def _status(line: str) -> str:
    match = MISSION_LINE.match(line)
    return match.group(2).strip().casefold() if match else ""


def _cites(numbers: Collection[int]) -> str:
    return ", ".join(f"#{n}" for n in sorted(numbers))


# Words that say who asked or how, not what: a paraphrase ("The user wants ...") adds them freely.
_FRAME_TEXT: Final = (
    "a an as at be by do if in is it of on or so to up we the and then with for from that this these "
    "those into onto also user users asked asks wants want wanted please should must will would can "
    "could our your their you his her its has have had was were are now next new all any each per "
    "via"
)
_FRAME_WORDS: Final = frozenset(_FRAME_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+")
_CITATION = re.compile(r"\((?:from|per) #\d+\)|\[\.\.\. cut[^\]]*\]")
MOSTLY: Final = 0.6  # share of an entry's content words that must be the user's or the mission's


def _stems(text: str) -> set[str]:
    """Content words, a plural "s" dropped and cut to five letters (a crude stem: "PRs" and "PR",
    "translate" and "translation" meet); framing words and single letters left out."""
    words = (w[:-1] if len(w) > 3 and w.endswith("s") else w for w in _WORD.findall(text.casefold()))
    return {w[:5] for w in words if (len(w) > 1 or w.isdigit()) and w not in _FRAME_WORDS}


def words_from(line: str, cited: Collection[str], mission: str = "") -> bool:
    """Whether a new mission line says what the user messages it cites say: at least MOSTLY of its content
    words are theirs or the mission's before (a new entry often restates what it replaces), and at least
    one is the cited messages' own, not the mission's (a copy of the old mission "from" "Continue with
    the next ticket." brings nothing of the user's). Its id, status and citation are left out."""
    match = MISSION_LINE.match(line)
    own = _stems(_CITATION.sub(" ", match.group(3) if match else line))
    theirs = set().union(*(_stems(text) for text in cited)) if cited else set()
    before = _stems(_CITATION.sub(" ", mission))
    return bool(own & (theirs - before)) and len(own & (theirs | before)) >= MOSTLY * len(own)


def _without_line(text: str, line: str) -> str:
    lines = text.splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if raw.rstrip() == line:
            return "".join(lines[:i] + lines[i + 1 :])
    return text
