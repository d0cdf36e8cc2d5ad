"""The structured checkpoint's working values: the answers applied so far, the limits, and the small text
helpers that clean a weak model's answer before it can land in the mind.

API:
    PARTS, MIND_PARTS, and the limits (MAX_NEW, ENTRY_CHARS, SCENE_CHARS ... see below)
    Question(part, text, schema, wording="")   wording: the harness's own words of it (see `Question`)
    Work.start(previous_mind, candidates, budgets, counter=None) -> Work
        .reset(parts, previous_mind)   .problem(part, message)   .all_problems() -> list[Problem]
    norm(text) -> str                         words only, case folded (echoes, repeats)
    one_line(value, limit) -> str             safe for one Markdown line; filler becomes ""
    is_filler(text, also=frozenset()) -> bool placeholders and key names only, however repeated
    echoes(words, sources) -> bool            mostly a phrase of the sources, a few words around it
    clean(work, value, limit) -> str          one_line, and "" for an echo of this turn's questions
    strings(work, value, limit) -> list[str]  the cleaned strings of a JSON list (at most MAX_NEW)
    parse(work, part, text) -> dict | None    the answer's JSON object; a problem on `work` otherwise
    next_id(ids) -> int                       the number after the highest "M<n>" / "W<n>" id
    workstream_lines(mind) -> dict[str, tuple[str, str]]   id -> (its line, its text after the status)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.memo import Candidate, Label
from avibe.checkpoint.model import Problem
from avibe.ports import TokenCounter

PARTS: Final[tuple[str, ...]] = ("memo", "mission", "workstreams", "notes", "room", "scene")
MIND_PARTS: Final[tuple[str, ...]] = ("mission", "workstreams", "notes", "room")
PREVIEW_CHARS: Final = 100
# a memo line kept last time was read whole then; enough to recognise it costs fewer prompt tokens (U1)
KEPT_PREVIEW_CHARS: Final = 60
MAX_NEW: Final = 3  # new entries per list and question: a small model answers better with little room
NOTES_MAX_NEW: Final = 2  # per notes list (here, decisions, lessons): a small model fills every slot offered
GATE: Final = "user_changed_mission"
SOURCE: Final = "from_message"  # M4: the user's message (its number) a new mission entry comes from
MAX_NEW_MISSION: Final = 1  # the user changes the purpose one message at a time; more is a weak model's noise
ENTRY_CHARS: Final = 200
WORKSTREAM_STATUSES: Final = ("active", "done", "blocked", "pending", "waiting")
SCENE_CHARS: Final[dict[str, int]] = {
    "current_step": 300,
    "progress": 400,
    "waiting_for": 300,
    "next_step": 400,
    "pitfalls": 400,
    "exact_references": 400,
}
# Below this window the scene's parts shrink in proportion, to SCENE_FLOOR_CHARS at the least: a small
# model fills whatever room the grammar gives (~700 tokens of scene in a 4k window crowds out the work it
# describes, and generating it costs a minute on two cores). Exact references keep more room (S6). The
# harness adds what it knows itself - jobs waited for, files, the last error (`checkpoint/facts.py`) - so
# at small windows the model's own parts stay short (a grammar-bound token costs ~2x a free one,
# and a 0.5B model fills whatever length the grammar allows, often by repeating itself).
SCENE_REFERENCE_WINDOW: Final = 32_768
# The parts the model is asked for. "Waiting for" and "exact references" are the harness's: it holds the
# jobs, watches, timers and delegated runs, the files read and written and the failing call's error line
# (`checkpoint/facts.py`), and a small model asked for them wrote the key names or repeated its other parts
# (benchmarks/checkpoint_cost.py --answers) - ~60 output tokens of a checkpoint's ~270.
MODEL_SCENE_PARTS: Final = ("current_step", "progress", "next_step", "pitfalls")
SCENE_FLOOR_CHARS: Final[dict[str, int]] = {
    "current_step": 100,
    "progress": 100,
    "waiting_for": 80,
    "next_step": 140,
    "pitfalls": 100,
    "exact_references": 160,
}
# Least characters per scene part, enforced by the grammar: the labels and "none" in the other parts
# take ~100 characters, so these make even a terse small model's block reach SCENE_MIN_CHARS (V1).
SCENE_MIN_CHARS_PER_PART: Final[dict[str, int]] = {"current_step": 60, "progress": 20, "next_step": 60}
# Sizing the grammar to the mind's caps: a line's markup ("- " ...) costs about LINE_TOKENS; English text
# runs ~4 characters a token, so CHARS_PER_TOKEN = 3 errs on the safe side; below MIN_ENTRY_CHARS a new
# line could say nothing useful, so none is offered.
LINE_TOKENS: Final = 4
CHARS_PER_TOKEN: Final = 3
MIN_ENTRY_CHARS: Final = 24
MIN_ENTRY_WORDS: Final = 3  # a new mind entry in fewer words says nothing (see `entry_text`)
LOOSE_MATCH_WORDS: Final = 4  # a repeat cut mid-word is only recognised on lines this long
# What a small model writes when it has nothing to say: placeholders and the schema's own key names.
FILLER: Final = frozenset(
    {"", "none", "n a", "na", "null", "nothing", "todo", "tbd", "text", "id", "status", "new", "keep"}
    | {"i am here", "decisions", "decision", "reason", "lessons", "workstreams", "user changed mission"}
    | {"merge", "retire", "ids"}
    | {" ".join(name.split("_")) for name in SCENE_CHARS}
    | {"none yet", "not yet", "nothing yet", "none so far", "nothing so far", "no", "nil", "empty"}
    | {"no progress", "no progress yet", "nothing to do", "nothing to report", "not applicable", "unknown"}
)
# "Waiting" with no what (seen from the 1.5B: "none yet, waiting for user's request, no progress yet, none
# next step, none pitfalls." in all four scene parts): filler beside a placeholder, a state on its own
# ("Waiting for the user's reply" stays; so does "Waiting for the user's reply on #12").
_WAITING_VOCABULARY: Final = frozenset(
    {"waiting", "for", "the", "user", "s", "request", "reply", "answer", "input", "instructions", "and"}
)
WAITING: Final = frozenset(
    " ".join(f"waiting for {the}user{s}{what}".split())
    for the in ("", "the ")
    for s in ("", " s")
    for what in ("", " request", " reply", " answer", " input", " instructions")
) | {"waiting"}
# An answer is an echo of the questions asked in this checkpoint turn when at most
# ECHO_EXTRA_WORDS of its words lie outside runs of ECHO_MIN_WORDS or more words copied from the harness's
# wording ("The mission is the final purpose of this conversation. Current entries: (none yet"), or when it
# holds ECHO_LONG_RUN words of that wording in a row ("the mission is being implemented. Current entries:
# (none yet) There is no mission entry yet: write a"): instructions copied, whatever is around them.
ECHO_MIN_WORDS: Final = 4
ECHO_EXTRA_WORDS: Final = 3
ECHO_LONG_RUN: Final = 8
# The notes question (I am here, Key decisions, Lessons) is asked only when something since the last
# checkpoint can add to those sections: a user's message worded as a rule, limit or
# agreement (`memo.reads_as_rule`, the N2 wording: I am here), or a message - the user's, Vibey's, another
# source's - that says a decision was made or something was learned. Tool output is not read: a file or a
# test log holds these words without deciding anything. A false positive only costs the question;
# a miss leaves the sections as an empty answer would.
DECISION_OR_LESSON: Final = re.compile(
    r"\b(?:decid\w*|decision\w*|chose|choose|chosen|choosing|instead|because|settled on|going with|"
    r"go with|switch(?:ed|ing)? to|from now on|change of plan|lesson\w*|learn\w*|turns? out|turned out|"
    r"reali[sz]\w*|mistake\w*|wrong|root cause|should have|next time|remember|prefer\w*|agree\w*|"
    r"report\w*|error\w*|fail\w*|broke\w*|workaround\w*)\b",
    re.IGNORECASE,
)
# A list of filler is filler too: the 0.5B answered every scene part with the key names, "current_step,
# progress, waiting_for, next_step, pitfalls, exact_references", and with "none yet, none, none, ...".
_LONGEST_PHRASE: Final = 8  # words: no FILLER or WAITING phrase is longer
_WORKSTREAM_ID = re.compile(r"^[-*+][ \t]+\[(W\d+)\][ \t]*(?:\([^)\n]*\))?[ \t]*(.*)$")


@dataclass(frozen=True, slots=True)
class Question:
    """A question: its text, its JSON schema, and its `wording` - the text without what it lists from
    the mind or the record (entries, messages): the harness's own words, which an answer must not echo
    even with a few words around them (`clean`). Empty: the text is all the harness's own."""

    part: str
    text: str
    schema: dict[str, Any]
    wording: str = ""

    @property
    def own_words(self) -> str:
        return self.wording or self.text


@dataclass
class Work:
    """The answers applied so far (mutable; lives inside one checkpoint turn)."""

    mind: str
    candidates: list[Candidate]
    budgets: Budgets
    ticked: frozenset[Label]
    scene: str = ""
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    echo: str = ""  # the question being answered, normalised (see `clean`)
    asked: list[str] = field(default_factory=list)  # the harness's wording of every question asked in this
    # turn so far, the current one last, normalised: an answer echoing an earlier one is an echo too
    intro: str = ""  # the turn's request text, normalised: a small model copies it into answers too
    counter: TokenCounter | None = None  # sizes the grammar's length limits to the section caps (M6)
    pending: dict[str, list[str]] = field(default_factory=dict)  # new lines a full section left out
    mission_gate: bool | None = None  # the memo answer's GATE: None when not asked or not answered
    since: frozenset[int] = frozenset()  # M4: the user's messages since the last checkpoint (citable)
    said: dict[int, str] = field(default_factory=dict)  # their texts: the scene's next step when nothing
    # moving out is the user's (S4; see `answers._completed_scene`)
    tool_output: str = ""  # the live conversation's tool results, normalised: a scene part copied from
    # them is not a state of the work (see `answers._copied_or_repeated`)
    notes_due: bool = True  # whether the notes question is asked (see DECISION_OR_LESSON, `notes_due`)
    reserved: dict[str, int] = field(default_factory=dict)  # section -> tokens an answer asked in the
    # same call may add there (`groups.ask`): the questions after it are sized to what is left (M6)

    @classmethod
    def start(
        cls,
        previous_mind: str,
        candidates: Sequence[Candidate],
        budgets: Budgets,
        counter: TokenCounter | None = None,
    ) -> Work:
        ticked = frozenset(c.label for c in candidates if c.ticked)  # kept from last time until answered
        return cls(
            mind=previous_mind, candidates=list(candidates), budgets=budgets, ticked=ticked, counter=counter
        )

    def all_problems(self) -> list[Problem]:
        return [p for part in PARTS for p in self.problems.get(part, [])]

    def reset(self, parts: Sequence[str], previous_mind: str) -> None:
        """Undo the parts about to be asked again (mind parts restart from the previous mind together)."""
        for part in parts:
            self.problems.pop(part, None)
        if any(p in MIND_PARTS for p in parts):
            self.mind = previous_mind
            self.pending = {}
        if "memo" in parts:
            self.ticked = frozenset(c.label for c in self.candidates if c.ticked)
            self.mission_gate = None
        if "scene" in parts:
            self.scene = ""

    def problem(self, part: str, message: str) -> None:
        self.problems.setdefault(part, []).append(Problem(f"answer.{part}", message))


def norm(text: str) -> str:
    """Text compared loosely: words only, case folded (to spot echoes and repeated entries)."""
    return " ".join(re.sub(r"[\W_]+", " ", text).casefold().split())


def one_line(value: str, limit: int = ENTRY_CHARS) -> str:
    """Model text made safe for one Markdown line: no line breaks, no comment markers, bounded. A weak
    model's filler - an echoed key name, "...", "none" - becomes "" so it never lands in the mind."""
    text = " ".join(value.replace("<!--", "").replace("-->", "").split())[:limit]
    return "" if is_filler(text) else text


def is_filler(text: str, also: frozenset[str] = frozenset()) -> bool:
    """Whether a text says nothing: placeholders ("none", "none yet", "n/a", "no progress yet") and key
    names (or `also`), one or many, whatever the punctuation between them ("none yet, none, none, ...");
    "waiting for the user's request" counts among them only beside a placeholder (WAITING)."""
    words = norm(text).split()
    phrases = FILLER | also | {"and"}
    if _segments(words, phrases):
        return True
    return any(w not in _WAITING_VOCABULARY for w in words) and _segments(words, phrases | WAITING)


def _segments(words: Sequence[str], phrases: frozenset[str] | set[str]) -> bool:
    """Whether `words` are a sequence of `phrases` (each whole words), nothing else."""
    reach = [True] + [False] * len(words)  # reach[i]: words[:i] is a sequence of phrases
    for end in range(1, len(words) + 1):
        reach[end] = any(
            reach[start] and " ".join(words[start:end]) in phrases
            for start in range(max(0, end - _LONGEST_PHRASE), end)
        )
    return reach[-1]


def echoes(words: Sequence[str], sources: Sequence[str]) -> bool:
    """Whether an answer's words (normalised) are mostly copied from `sources` (normalised texts): at most
    ECHO_EXTRA_WORDS words outside runs of ECHO_MIN_WORDS or more words found in one source, or a run of
    ECHO_LONG_RUN. A word of the answer's own that is in no source can never be inside such a run."""
    found = [f" {source} " for source in sources if source]
    covered = [False] * len(words)
    longest = 0
    for start in range(len(words)):
        end = start
        while end < len(words) and any(f" {' '.join(words[start : end + 1])} " in h for h in found):
            end += 1
        if end - start >= ECHO_MIN_WORDS:
            covered[start:end] = [True] * (end - start)
            longest = max(longest, end - start)
    if longest >= ECHO_LONG_RUN:
        return True
    return longest >= ECHO_MIN_WORDS and covered.count(False) <= ECHO_EXTRA_WORDS


def clean(work: Work, value: Any, limit: int = ENTRY_CHARS) -> str:
    """`one_line`, and "" for an echo: a phrase copied from the question itself (a small model echoes
    the instructions: "what you may decide alone" as a decision) or from an earlier question of this
    turn, or mostly such a phrase with a few words around it (`echoes`; seen: "The mission is
    the final purpose of this conversation. Current entries: (none yet" as a workstream)."""
    text = one_line(str(value), limit)
    if not text:
        return ""
    words = norm(text)
    if work.echo and f" {words} " in f" {work.echo} ":
        work.notes.append(f"answer copied from the question, ignored: {text!r}")
        return ""
    if any(f" {words} " in f" {wording} " for wording in work.asked) or echoes(
        words.split(), [*work.asked, work.intro]
    ):
        work.notes.append(f"answer echoes the words of a question, ignored: {text!r}")
        return ""
    return text


def strings(work: Work, value: Any, limit: int = ENTRY_CHARS) -> list[str]:
    if not isinstance(value, list):
        return []
    return [line for v in value[:MAX_NEW] if isinstance(v, str) and (line := entry_text(work, v, limit))]


def entry_text(work: Work, value: Any, limit: int = ENTRY_CHARS) -> str:
    """`clean`, and "" for a new entry of fewer than MIN_ENTRY_WORDS words: the 0.5B filled its lists with
    "1", "The AI", "Oakhaven" (benchmarks/checkpoint_cost.py --answers), which then filled the section
    and brought the room question - a call - to make space for them."""
    text = clean(work, value, limit)
    if text and len(text.split()) < MIN_ENTRY_WORDS:
        work.notes.append(f"entry too short to say anything, ignored: {text!r}")
        return ""
    return text


def parse(work: Work, part: str, text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text, strict=False)  # grammar-made strings may hold raw newlines or tabs
    except json.JSONDecodeError as exc:
        work.problem(part, f"The answer is not JSON ({exc.msg}). Answer with the JSON object only.")
        return None
    if not isinstance(data, dict):
        work.problem(part, "The answer must be one JSON object.")
        return None
    return data


def next_id(ids: Sequence[str]) -> int:
    """The number after the highest "M<n>" / "W<n>" id."""
    return max((int(i[1:]) for i in ids if i[1:].isdigit()), default=0) + 1


def workstream_lines(mind: str) -> dict[str, tuple[str, str]]:
    """Workstream id -> (its line, its text after the status)."""
    found: dict[str, tuple[str, str]] = {}
    for line in mind.split("\n"):
        match = _WORKSTREAM_ID.match(line)
        if match and match.group(1) not in found:
            found[match.group(1)] = (line, match.group(2))
    return found
