"""The memo: the user's own words, copied from the record, never retold (N1-N7).

API:
    Label = int | str       a checklist line's number: 12 (the whole message #12) or "12.3" (its 3rd sentence)
    Candidate(seq: int, text: str, ticked: bool, kept: bool, part: int = 0)   one checklist line; kept: from
        the last memo; part: 0 for the whole message, k >= 1 for its k-th sentence;  .label -> Label
    memo_candidates(moved_out: Sequence[Entry], previous_memo: Sequence[MemoItem],
                    already_dismissed: frozenset[int], *, counter=None, per_message=0,
                    entries: Mapping[int, Entry] | None = None) -> list[Candidate]     (N1, N5, N6, N7)
        with a counter and per_message, a message too long to keep whole also gets one line per sentence
        that its cut would lose (at most MAX_SENTENCE_LINES, the last ones)
    clean_labels(raw: Iterable[object]) -> frozenset[Label]   well-formed labels only, normalised
    render_checklist(candidates, preview_chars=80) -> str    "- [ ] #12 preview", "- [ ] #12.3 preview"
    read_ticks(original: str, edited: str) -> TickResult(ticked: frozenset[Label], problems: list[Problem])
    dismissed(candidates: Sequence[Candidate], kept: Collection[Label]) -> frozenset[int]
        seqs none of whose lines is kept (N6)
    sentences(text: str) -> list[tuple[int, int]]   (start, end) of each sentence, stripped (verbatim)
    cut_note(seq: int) -> str              "\\n[... cut; full text: message #12 in the record]"
    sentence_note(seq: int) -> str         " (from #12)": the pointer after a sentence kept alone
    cut_message(entry: Entry, counter: TokenCounter, per_message: int) -> MemoItem   (N5; any entry kind -
                                           the caller has already chosen user entries)
    sentence_item(entry, part, counter, per_message) -> MemoItem     one sentence verbatim + its pointer
    build_memo(ticked: Iterable[Label], entries_by_seq: Mapping[int, Entry], counter: TokenCounter,
               budgets: Budgets, previous_memo: Sequence[MemoItem] = ()) -> MemoOutcome(items, problems)
    memo_text_matches(item: MemoItem, record_text: str) -> bool    verbatim, a prefix + cut_note, or a
                                           verbatim piece of the record + sentence_note (N4)
    memo_labels(items, entries) -> list[Label]      the checklist label of each memo item
    memo_tokens(items: Iterable[MemoItem], counter: TokenCounter) -> int
    reads_as_rule(text: str) -> bool       worded as a standing rule, limit or permission ("never", "do not")
    reads_as_limit(text: str) -> bool      worded as a limit on what may be done ("never", "only", "at most");
                                           a value to follow ("must be 16") or a grant ("you may") is none
    contrasted(text: str) -> str           what a contrast excludes ("must be 16, not 48": "48"), or ""
    says_nothing_that_stays(text) -> bool  only pleasantries, go-aheads, questions for information (N3):
                                           never kept for recency; a tick on it is let go
    mission_sources(missions, candidates, entries, counter, per_message) -> list[Label]
        for each mission text (the model's words, M4), the line with the user's sentence that says most of it
    rules_kept(candidates, ticked, entries, counter, budgets, previous_memo=(), first=())
        -> RulesKept(added, let_go)
        the lines the harness keeps besides the model's ticks: every rule-worded sentence of a message moving
        out now, or memo item kept before, that the ticks leave out; newest first, within the memo budget,
        letting go ticked lines that state no rule (oldest first) to make room, and fitting over-ticking
    newest_kept(candidates, chosen, entries, counter, budgets, previous_memo=(), first=(), live=())
        -> NewestKept
        the user's newest words besides the ticks and rules: a later message about a kept rule stays
        with it (or the rule goes), each message moving out now is kept whole, newest first, and a message
        still in the conversation that changes a kept line is copied beside it where it fits

Candidates are chosen by the stored kind ("user") only, never by text (N7). build_memo copies the text
from the entries given, never from model output (N4), and re-checks the kind; a ticked seq that is not a
user entry is refused. A previous memo item may be kept as it is when its entry is not given (it was
copied from the record by an earlier checkpoint).

Long messages keep their rules (N5, L3): a message over the per-message budget is cut, and a rule in its
last sentence was lost with the cut ("Never modify anything under vendor/" in the demo). So such a message
also gets a checklist line per sentence the cut loses; a ticked sentence is copied by the harness from the
record, verbatim, with the pointer " (from #N)" to the whole message - the model still only ticks.

And they keep them whatever the model ticks (N2 as a harness guarantee): a small model, offered every
sentence, ticked others than the rules at the ends (the eval's late_rule: 0 of 3 kept on the 0.5B). So
each sentence of a message moving out now that reads as a standing rule ("never", "do not", "only", "may"
...) and that no ticked line holds is kept by the harness too - copied from the record like any tick,
within the memo budget, the newest messages first; and so is a rule-worded memo item kept before that the
model now lets go (the 0.5B dropped them at the next checkpoint). Choosing by text here only adds more of
the user's own words: candidates are still user entries by stored kind (N7). What ends a rule's stay is
the budget: newer rules push out older ones. A rule never stays without the user's later words about it
(`newest_kept`): a revocation or re-grant worded without any rule word stays beside it, in order, or the
rule is let go; and the newest messages moving out are kept whole, as a handoff keeps them, so a rule
worded without those words ("dont use /tmp ...") is kept all the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.model import MemoItem, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry

DEFAULT_PREVIEW_CHARS: Final = 80
_CHECK_LINE = re.compile(r"^[-*][ \t]*\[([ xX])\][ \t]*#(\d+(?:\.\d+)?)(?:[ \t]+(.*?))?[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])[ \t]+|[ \t]*(?:\r?\n)+[ \t]*")
MAX_SENTENCE_LINES: Final = 12  # sentence lines per long message: the last ones (rules come at the end)
SENTENCE_CUT: Final = " ..."  # a sentence itself over the per-message budget is cut, marked so

# Wording of a standing rule, limit or permission (N2). It only ever adds the user's own sentences to the
# memo, so a false positive costs budget, never a word of the user's.
_RULE_WORDING: Final = re.compile(
    r"\b(?:never|always|must|mustn't|shall|do not|don't|does not|doesn't|only|may|may not|no longer|"
    r"not allowed|allowed to|forbidden|prohibited|without asking|ask me|make sure|under no circumstances|"
    r"at most|at least|no more than|instead of|should|shouldn't|should not|has to|have to|needs to|avoid)\b"
    r"|,\s*not\b",  # a contrast that forbids: "Pinned base image versions, not :latest."
    re.IGNORECASE,
)

# Of that wording, what limits what may be done: a no, an only, an always, a bound, a condition to ask
# first. A sentence that sets a value to follow ("must be 16"), says how ("make sure"), or grants ("you
# may") limits nothing a request could go against; a contrast ("16, not 48") limits only what it excludes.
_LIMIT_WORDING: Final = re.compile(
    r"\b(?:never|always|only|mustn't|must not|do not|don't|does not|doesn't|may not|cannot|can't|"
    r"no longer|not allowed|forbidden|prohibited|ask me|under no circumstances|at most|"
    r"no more than|shouldn't|should not|avoid|no one|nobody)\b",
    re.IGNORECASE,
)
_CONTRAST: Final = re.compile(r",\s*not\s+([^,;.!?]*(?:\.\d[^,;.!?]*)*)", re.IGNORECASE)

Label = int | str
_WORD_BREAK_SHARE: Final = 5  # cut at a space when one is within the last fifth of the prefix


@dataclass(frozen=True, slots=True)
class Candidate:
    seq: int
    text: str
    ticked: bool = False
    kept: bool = False
    part: int = 0  # 0: the whole message; k >= 1: its k-th sentence

    @property
    def label(self) -> Label:
        return label_of(self.seq, self.part)


def label_of(seq: int, part: int) -> Label:
    return seq if part == 0 else f"{seq}.{part}"


def parse_label(label: object) -> tuple[int, int] | None:
    """(seq, part) of a label (an int, or "12" / "12.3"); None for anything else (a bool included)."""
    if type(label) is int:
        return (label, 0) if label >= 0 else None
    if isinstance(label, str) and re.fullmatch(r"\d+(\.\d+)?", label):
        seq, _, part = label.partition(".")
        return int(seq), int(part or 0)
    return None


def clean_labels(raw: Iterable[object]) -> frozenset[Label]:
    """The well-formed labels among `raw`, normalised ("12" -> 12); junk and bools dropped (True == 1 in a
    set, so a bool left in would hide message #1's label)."""
    return frozenset(label_of(*parsed) for label in raw if (parsed := parse_label(label)))


def _order(label: Label) -> tuple[int, int]:
    return parse_label(label) or (-1, -1)


@dataclass(frozen=True, slots=True)
class TickResult:
    ticked: frozenset[Label]
    problems: list[Problem]


@dataclass(frozen=True, slots=True)
class MemoOutcome:
    items: tuple[MemoItem, ...]
    problems: list[Problem]


def _hard_wrap(text: str, boundary: re.Match[str]) -> bool:
    """A single line break inside a sentence: text wrapped by hand ("Non-root \nuser in the runtime
    stage."), where the line does not end a sentence and the next one goes on in lower case. A real
    user's wrapped rule was split in two there, and neither half was kept as a rule."""
    if boundary.group().count("\n") != 1 or boundary.end() >= len(text):
        return False
    before = text[: boundary.start()].rstrip()
    return bool(before) and before[-1] not in ".!?:;" and text[boundary.end()].islower()


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`: split after . ! ? followed by a space, and at line breaks
    (not where a hand-wrapped sentence goes on, see _hard_wrap); stripped of surrounding white space, so
    text[start:end] is the sentence verbatim."""
    spans: list[tuple[int, int]] = []
    start = 0
    ends = [b for b in _SENTENCE_END.finditer(text) if not _hard_wrap(text, b)]
    for boundary in [*ends, None]:
        end = boundary.start() if boundary else len(text)
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = boundary.end() if boundary else len(text)
    return spans


def _sentence_candidates(entry: Entry, counter: TokenCounter, per_message: int) -> list[Candidate]:
    """A message too long to keep whole: one line per sentence its cut would lose (the last ones)."""
    if per_message <= 0 or counter.count(entry.text) <= per_message:
        return []
    kept = _prefix_kept(entry, counter, per_message)
    lost = [
        Candidate(entry.seq, entry.text[a:b], part=k)
        for k, (a, b) in enumerate(sentences(entry.text), 1)
        if b > kept
    ]
    return lost[-MAX_SENTENCE_LINES:]


def _sentence_part(item: MemoItem, entry: Entry | None) -> int:
    """Which sentence of its message a kept sentence item is (0: the item is not one it can place)."""
    if entry is None or not item.text.endswith(sentence_note(item.seq)):
        return 0
    body = item.text.removesuffix(sentence_note(item.seq)).removesuffix(SENTENCE_CUT)
    for k, (a, b) in enumerate(sentences(entry.text), 1):
        if entry.text[a:b].startswith(body):
            return k
    return 0


def memo_labels(items: Sequence[MemoItem], entries: Mapping[int, Entry] | None = None) -> list[Label]:
    """The checklist label of each memo item: its seq, or "seq.k" for a sentence kept alone (k placed from
    the entry when given, else numbered by its position among that message's sentence items)."""
    labels: list[Label] = []
    used: set[Label] = set()
    for item in items:
        part = 0
        if item.text.endswith(sentence_note(item.seq)):
            part = _sentence_part(item, (entries or {}).get(item.seq))
            while part == 0 or label_of(item.seq, part) in used:
                part += 1
        label = label_of(item.seq, part)
        used.add(label)
        labels.append(label)
    return labels


def memo_candidates(
    moved_out: Sequence[Entry],
    previous_memo: Sequence[MemoItem],
    already_dismissed: frozenset[int],
    *,
    counter: TokenCounter | None = None,
    per_message: int = 0,
    entries: Mapping[int, Entry] | None = None,
) -> list[Candidate]:
    """The previous memo's items (ticked) plus the user entries moved out now and never dismissed, in
    order; with a counter, a message too long to keep whole also gets a line per sentence its cut loses."""
    by_label: dict[Label, Candidate] = {}
    for item, label in zip(previous_memo, memo_labels(previous_memo, entries), strict=True):
        part = _order(label)[1]
        by_label[label] = Candidate(item.seq, item.text, ticked=True, kept=True, part=part)
    kept_seqs = {item.seq for item in previous_memo}
    for entry in moved_out:
        if entry.is_user and entry.seq not in kept_seqs and entry.seq not in already_dismissed:
            by_label[entry.seq] = Candidate(entry.seq, entry.text)
            for sentence in _sentence_candidates(entry, counter, per_message) if counter else ():
                by_label[sentence.label] = sentence
    return [by_label[label] for label in sorted(by_label, key=_order)]


def _preview(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= limit:
        return one_line
    return one_line[: max(1, limit - 3)].rstrip() + "..."


def render_checklist(candidates: Sequence[Candidate], preview_chars: int = DEFAULT_PREVIEW_CHARS) -> str:
    """One line per candidate: checkbox, message number, single-line preview (N1)."""
    lines = [
        f"- [{'x' if c.ticked else ' '}] #{c.label} {_preview(c.text, preview_chars)}" for c in candidates
    ]
    return "".join(line.rstrip() + "\n" for line in lines)


def _parse_lines(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """Non-blank lines (trailing spaces ignored) with their checklist match, if any."""
    return [(line.rstrip(), _CHECK_LINE.match(line.rstrip())) for line in text.splitlines() if line.strip()]


def _preview_of(match: re.Match[str] | None) -> str:
    return (match.group(3) or "") if match else ""


def _line_problems(original: dict[str, str], edited: list[tuple[str, re.Match[str] | None]]) -> list[Problem]:
    problems: list[Problem] = []
    seen: list[str] = []
    for line, match in edited:
        seq = match.group(2) if match else None
        if seq is None or seq not in original:
            problems.append(
                Problem(
                    "memo.line_added",
                    f"The line '{line[:70]}' is not in the checklist. "
                    "Remove it; only tick or untick the boxes.",
                )
            )
        elif seq in seen:
            problems.append(Problem("memo.line_repeated", f"The line for #{seq} appears twice; keep one."))
        else:
            seen.append(seq)
            if _preview_of(match) != original[seq]:
                problems.append(
                    Problem(
                        "memo.line_changed",
                        f"The text of line #{seq} was changed. Put it "
                        "back as it was; change only the box: [x] keep, [ ] let go.",
                    )
                )
    problems += [
        Problem(
            "memo.line_removed",
            f"The line for #{seq} was removed. Put it back; to let the message go, leave its box empty: [ ].",
        )
        for seq in original
        if seq not in seen
    ]
    if seen != [seq for seq in original if seq in seen]:
        problems.append(
            Problem(
                "memo.lines_reordered",
                "The lines were reordered. Keep them in the original order; change only the boxes.",
            )
        )
    return problems


def read_ticks(original: str, edited: str) -> TickResult:
    """The ticked numbers of an edited checklist; every change but a checkbox is a problem (N4, V3).

    Blank lines and trailing spaces are ignored; other non-checklist lines of the original (a header)
    must stay as they are."""
    original_parsed = _parse_lines(original)
    original_lines = {m.group(2): _preview_of(m) for _, m in original_parsed if m}
    fixed = Counter(line for line, m in original_parsed if not m)
    checks: list[tuple[str, re.Match[str] | None]] = []
    for line, match in _parse_lines(edited):
        if match is None and fixed[line] > 0:
            fixed[line] -= 1
        else:
            checks.append((line, match))
    problems = _line_problems(original_lines, checks)
    problems += [
        Problem("memo.line_removed", f"The line '{line[:70]}' was removed. Put it back as it was.")
        for line in fixed.elements()
    ]
    ticked = frozenset(
        _as_label(m.group(2)) for _, m in checks if m and m.group(1) in "xX" and m.group(2) in original_lines
    )
    return TickResult(ticked=ticked, problems=problems)


def _as_label(text: str) -> Label:
    return int(text) if text.isdigit() else text


def dismissed(candidates: Sequence[Candidate], kept: Collection[Label]) -> frozenset[int]:
    """Messages none of whose lines is kept: never listed again (N6); they stay in the record under their
    number. `kept` holds labels (a message's seq counts for the message, "12.3" for message 12)."""
    kept_seqs = {parsed[0] for label in kept if (parsed := parse_label(label))}
    return frozenset(c.seq for c in candidates if c.seq not in kept_seqs)


def cut_note(seq: int) -> str:
    return f"\n[... cut; full text: message #{seq} in the record]"


def sentence_note(seq: int) -> str:
    return f" (from #{seq})"


def _fits(text: str, counter: TokenCounter, budget: int) -> bool:
    return counter.count(text) <= budget


def _longest_prefix(text: str, note: str, counter: TokenCounter, budget: int) -> int:
    """Largest k with text[:k] + note within budget (binary search; counts grow with length)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(text[:middle] + note, counter, budget):
            low = middle
        else:
            high = middle - 1
    return low


def _word_boundary(text: str, k: int) -> int:
    space = text.rfind(" ", 0, k)
    return space if space > k - k // _WORD_BREAK_SHARE and space > 0 else k


def cut_message(entry: Entry, counter: TokenCounter, per_message: int) -> MemoItem:
    """The entry's text verbatim, or its longest prefix that fits with a note pointing at the record (N5).

    Budgets from budgets_for are at least MIN_MEMO_MESSAGE (150) tokens, room for the note and a paragraph;
    below the note's own size the item is the note alone (and validate reports it over its cap)."""
    if _fits(entry.text, counter, per_message):
        return MemoItem(seq=entry.seq, text=entry.text, cut=False)
    note = cut_note(entry.seq)
    k = _word_boundary(entry.text, _longest_prefix(entry.text, note, counter, per_message))
    while k > 0 and not _fits(entry.text[:k] + note, counter, per_message):
        k -= 1  # a tokenizer whose counts are not monotone in length
    return MemoItem(seq=entry.seq, text=entry.text[:k] + note, cut=True)


def sentence_item(entry: Entry, part: int, counter: TokenCounter, per_message: int) -> MemoItem:
    """Sentence `part` (1-based) of the entry, verbatim, with its pointer to the whole message; a sentence
    itself over the per-message budget is cut (its longest prefix that fits, marked SENTENCE_CUT)."""
    a, b = sentences(entry.text)[part - 1]
    sentence, note = entry.text[a:b], sentence_note(entry.seq)
    if _fits(sentence + note, counter, per_message):
        return MemoItem(seq=entry.seq, text=sentence + note, cut=True)
    tail = SENTENCE_CUT + note
    k = _word_boundary(sentence, _longest_prefix(sentence, tail, counter, per_message))
    while k > 1 and not _fits(sentence[:k] + tail, counter, per_message):
        k -= 1
    return MemoItem(seq=entry.seq, text=sentence[: max(k, 1)] + tail, cut=True)


def memo_text_matches(item: MemoItem, record_text: str) -> bool:
    """True when the item holds the record text byte for byte; or (cut) a proper prefix plus the cut note;
    or (cut) a non-empty verbatim piece of the record - a sentence, or its start marked SENTENCE_CUT - plus
    the sentence pointer " (from #N)"."""
    if not item.cut:
        return item.text == record_text
    note = cut_note(item.seq)
    if item.text.endswith(note):
        prefix = item.text[: len(item.text) - len(note)]
        return len(prefix) < len(record_text) and record_text.startswith(prefix)
    pointer = sentence_note(item.seq)
    if not item.text.endswith(pointer):
        return False
    body = item.text[: len(item.text) - len(pointer)]
    start = body.removesuffix(SENTENCE_CUT)
    return bool(body.strip()) and (body in record_text or (bool(start.strip()) and start in record_text))


def memo_tokens(items: Iterable[MemoItem], counter: TokenCounter) -> int:
    return sum(counter.count(item.text) for item in items)


def _copy(
    label: Label,
    entries: Mapping[int, Entry],
    previous: Mapping[Label, MemoItem],
    counter: TokenCounter,
    budgets: Budgets,
) -> MemoItem | Problem:
    seq, part = _order(label)
    entry = entries.get(seq)
    if entry is None:
        if label in previous:
            return previous[label]
        return Problem(
            "memo.unknown_message", f"Message #{label} is not in the checklist's record; untick it."
        )
    if not entry.is_user:
        return Problem(
            "memo.not_user",
            f"Message #{seq} was not written by the user ({entry.kind}); only the "
            "user's own messages can be kept. Untick it.",
        )
    if part == 0:
        return cut_message(entry, counter, budgets.memo_per_message)
    if part > len(sentences(entry.text)):
        return Problem("memo.unknown_message", f"Message #{seq} has no sentence {part}; untick #{label}.")
    return sentence_item(entry, part, counter, budgets.memo_per_message)


def _redundant(item: MemoItem, whole: MemoItem | None, record: str | None) -> bool:
    """A sentence item whose words the kept whole message already holds (its uncut text, or its prefix)."""
    if whole is None or record is None or not item.text.endswith(sentence_note(item.seq)):
        return False
    body = item.text.removesuffix(sentence_note(item.seq)).removesuffix(SENTENCE_CUT)
    held = whole.text.removesuffix(cut_note(item.seq)) if whole.cut else whole.text
    at = record.find(body)
    return at >= 0 and at + len(body) <= len(held) and record.startswith(held)


def build_memo(
    ticked: Iterable[Label],
    entries_by_seq: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
) -> MemoOutcome:
    """Copy each ticked message's (or sentence's) original text from the record entries (N4), cut per
    message (N5); a sentence the kept whole message already holds is not repeated; a problem when the
    total passes the memo budget (V3)."""
    previous = dict(zip(memo_labels(previous_memo, entries_by_seq), previous_memo, strict=True))
    items: list[MemoItem] = []
    problems: list[Problem] = []
    wholes: dict[int, MemoItem] = {}
    labels = {label for raw in set(ticked) if (parsed := parse_label(raw)) for label in [label_of(*parsed)]}
    for label in sorted(labels, key=_order):
        copied = _copy(label, entries_by_seq, previous, counter, budgets)
        if isinstance(copied, Problem):
            problems.append(copied)
            continue
        entry = entries_by_seq.get(copied.seq)
        if _redundant(copied, wholes.get(copied.seq), entry.text if entry else None):
            continue
        if any(item.seq == copied.seq and item.text == copied.text for item in items):
            continue  # a sentence said twice in one message: kept once (a repeat would fail validation)
        if _order(label)[1] == 0:
            wholes[copied.seq] = copied
        items.append(copied)
    total = memo_tokens(items, counter)
    if total > budgets.memo_total:
        problems.append(over_budget_problem(total, budgets.memo_total))
    return MemoOutcome(items=tuple(items), problems=problems)


def reads_as_rule(text: str) -> bool:
    """A sentence worded as a standing rule, limit or permission ("Never modify...", "Only Ana may...")."""
    return _RULE_WORDING.search(text) is not None


def reads_as_limit(text: str) -> bool:
    """A sentence worded as a limit on what may be done ("Never push...", "Only Ana may...", "at most $40",
    "ask me before ..."), not only as a value or a way to follow ("must be 16") or a grant ("you may")."""
    return _LIMIT_WORDING.search(text) is not None


def contrasted(text: str) -> str:
    """What a sentence's contrast excludes ("the pool must be 16, not 48." -> "48"; "" for none): the words
    after ", not" up to the end of that phrase."""
    found = _CONTRAST.search(text)
    return found.group(1).strip() if found else ""


# N3: what the user said only to push the work along, or asked in order to be told, holds nothing once it
# is answered: pleasantries and go-aheads ("Thanks. What's next?", "ok, continue", "Sounds right to me.")
# and questions for information ("How long do the tests take now?"). The eval's talkative users filled
# the 0.5B's memo with 20 of them around two rules, and its answers from that context were worse than a
# handoff's. A question that asks for work or suggests a way ("Can you switch to pnpm?", "Why not use
# pnpm?") or is worded as a rule is not one.
_PUSH_ALONG: Final = frozenset(
    re.findall(
        r"\S+",
        "thanks thank you ok okay sure great nice cool good fine yes yep yeah continue go on carry keep "
        "going next what's whats sounds right looks to me by lgtm perfect alright all proceed hm hmm",
    )
)
_ASKS_FOR_WORK: Final = re.compile(
    r"^\W*(?:(?:can|could|would|will|should|shall) (?:you|we)|please|let's|let us|why (?:don't|not)|"
    r"how about|what about|maybe)\b",
    re.IGNORECASE,
)


def says_nothing_that_stays(text: str) -> bool:
    """Whether every sentence of a user message is a pleasantry, a go-ahead or a question for information
    (N3: let go once answered); never for a message worded as a rule or one that asks for work."""
    spans = sentences(text)
    if not spans or reads_as_rule(text):
        return False
    for start, end in spans:
        sentence = text[start:end]
        words = [w.casefold() for w in re.findall(r"[\w']+", sentence)]
        if words and all(w in _PUSH_ALONG for w in words):
            continue
        if sentence.rstrip().endswith("?") and not _ASKS_FOR_WORK.search(sentence):
            continue
        return False
    return True


def _prefix_kept(entry: Entry, counter: TokenCounter, per_message: int) -> int:
    """How many characters of the entry its whole-message memo item carries (all of them when uncut)."""
    whole = cut_message(entry, counter, per_message)
    return len(whole.text) - len(cut_note(entry.seq)) if whole.cut else len(entry.text)


def _rule_lines(
    entry: Entry, ticked: Collection[Label], counter: TokenCounter, per_message: int
) -> list[Label]:
    """The lines that would carry the rule-like sentences of `entry` that its ticked lines do not: the whole
    message for a sentence inside what the whole item keeps (all of it when uncut), else the sentence's own
    line ("12.7")."""
    prefix = _prefix_kept(entry, counter, per_message)
    parts = {p[1] for label in ticked if (p := parse_label(label)) and p[0] == entry.seq}
    lines: list[Label] = []
    for k, (a, b) in enumerate(sentences(entry.text), 1):
        inside = b <= prefix
        if k in parts or (inside and 0 in parts) or not reads_as_rule(entry.text[a:b]):
            continue
        lines.append(entry.seq if inside else label_of(entry.seq, k))
    return list(dict.fromkeys(lines))


def _unticked_rules(
    candidates: Sequence[Candidate],
    ticked: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    per_message: int,
) -> list[Label]:
    """Every line that would carry a rule-worded sentence the ticks leave out: of a message moving out now
    (its sentences, see _rule_lines), or a memo item kept before (its line); newest first."""
    lines: list[Label] = []
    for seq in sorted({c.seq for c in candidates}, reverse=True):
        entry = entries.get(seq)
        mine = [c for c in candidates if c.seq == seq]
        if any(not c.kept for c in mine) and entry is not None and entry.is_user:
            lines += reversed(_rule_lines(entry, ticked, counter, per_message))
        for c in sorted((c for c in mine if c.kept), key=lambda c: c.part, reverse=True):
            body = c.text.removesuffix(sentence_note(seq)).removesuffix(cut_note(seq))
            if c.label not in ticked and reads_as_rule(body):
                lines.append(c.label)
    return lines


# A mission entry is the model's words (M4); its source sentence in the user's words is what the eval's
# "mission byte-identical" looks for, and what drifts: the 1.5B wrote the mission well and ticked other
# messages, so the user's own statement of it left the context. Matched by content words, not wording.
_WORDS = re.compile(r"[^\W_]+(?:[/.'_-][^\W_]+)*")
_COMMON: Final = frozenset(
    {
        "the",
        "and",
        "for",
        "this",
        "that",
        "with",
        "you",
        "your",
        "our",
        "all",
        "are",
        "from",
        "into",
        "have",
        "will",
        "what",
        "when",
        "then",
        "them",
        "they",
        "its",
        "was",
        "were",
        "has",
        "had",
        "but",
        "not",
        "can",
        "any",
        "each",
        "one",
        "out",
        "per",
        "via",
        "also",
        "just",
        "let",
        "lets",
        "please",
        "should",
        "would",
        "could",
    }
)
MISSION_MATCH_WORDS: Final = 3  # at least this many of the mission's content words in the sentence ...
MISSION_MATCH_SHARE: Final = 0.5  # ... and at least this share of them


def _content_words(text: str) -> set[str]:
    """Words that carry meaning, a plural "s" dropped ("tickets" and "ticket" are one word here)."""
    words = (w.casefold() for w in _WORDS.findall(text))
    kept = (w for w in words if (len(w) >= 3 or w.isdigit()) and w not in _COMMON)
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in kept}


def mission_sources(
    missions: Sequence[str],
    candidates: Sequence[Candidate],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    per_message: int,
) -> list[Label]:
    """For each mission text, the line carrying the earliest user sentence it says: one sharing at least
    MISSION_MATCH_WORDS content words with it, and MISSION_MATCH_SHARE of the shorter's (a mission the
    model wrote from several sentences still finds the one that set the goal; the earliest, because the
    user states the purpose before the details, and not one already the source of an earlier mission).
    The whole message when its memo item holds that sentence, else the sentence's own line. Candidates
    only (user entries by stored kind, N7); none for a mission that already holds the sentence (quoted
    from the record)."""
    wanted_each = [_content_words(mission) for mission in missions]
    if not wanted_each:
        return []
    said = [
        (text, _content_words(text), label)
        for text, label in _sentence_lines(candidates, entries, counter, per_message)
    ]
    lines: list[Label] = []
    for mission, wanted in zip(missions, wanted_each, strict=True):
        for text, words, label in said:
            least = max(MISSION_MATCH_WORDS, min(len(wanted), len(words)) * MISSION_MATCH_SHARE)
            if label not in lines and len(wanted & words) >= least and text not in mission:
                lines.append(label)
                break
    return lines


def _sentence_lines(
    candidates: Sequence[Candidate], entries: Mapping[int, Entry], counter: TokenCounter, per_message: int
) -> Iterator[tuple[str, Label]]:
    """(sentence, the line carrying it) for each sentence of the candidates' user entries, in order."""
    for seq in sorted({c.seq for c in candidates}):
        entry = entries.get(seq)
        if entry is None or not entry.is_user:
            continue
        prefix = _prefix_kept(entry, counter, per_message)
        for k, (a, b) in enumerate(sentences(entry.text), 1):
            yield entry.text[a:b], seq if b <= prefix else label_of(seq, k)


@dataclass(frozen=True, slots=True)
class RulesKept:
    added: tuple[Label, ...]  # lines kept besides the model's ticks, newest first
    let_go: tuple[Label, ...] = ()  # ticked lines let go: N3's push-alongs, then to fit the budget


def rules_kept(
    candidates: Sequence[Candidate],
    ticked: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
    first: Sequence[Label] = (),
) -> RulesKept:
    """The memo's lines as the harness settles them around the model's ticks (N2, N5): `first` (the
    mission's source, `mission_sources`) before everything, kept and never let go like a rule; every
    rule-worded sentence of a user message moving out now that no ticked line holds, and every
    rule-worded memo item kept before that the model let go, is added - newest first. Rules come before
    what the model ticked that states none, and the total stays within the budget: ticked lines without a
    rule are let go, oldest first, to make room - and when the ticks alone pass the budget (a 0.5B model
    ticks every number it can count, and a repair round rarely fixes it), those first, then the oldest
    ticked rules."""
    ticked_labels = clean_labels(ticked)
    previous = dict(zip(memo_labels(previous_memo, entries), previous_memo, strict=True))

    def total(labels: Collection[Label]) -> int:
        return memo_tokens(build_memo(labels, entries, counter, budgets, previous_memo).items, counter)

    plain: list[tuple[Label, int]] = []  # ticked lines that state no rule, oldest first, with their cost
    ruled: list[Label] = []
    let_go: list[Label] = []
    for label in sorted(ticked_labels, key=_order):
        item = _copy(label, entries, previous, counter, budgets)
        if isinstance(item, MemoItem) and (label in first or reads_as_rule(item.text)):
            ruled.append(label)
        elif isinstance(item, MemoItem) and says_nothing_that_stays(item.text):
            let_go.append(label)  # N3: a tick on "Thanks. What's next?" is let go whatever the budget
        elif isinstance(item, MemoItem):
            plain.append((label, counter.count(item.text)))
    used = total(ticked_labels)
    while used > budgets.memo_total and (plain or ruled):  # over-ticked: fit the budget, rules last
        let_go.append(plain.pop(0)[0] if plain else ruled.pop(0))
        used = total(ticked_labels - set(let_go))
    added: list[Label] = []
    wanted = [*first, *_unticked_rules(candidates, ticked_labels, entries, counter, budgets.memo_per_message)]
    for label in wanted:
        item = _copy(label, entries, previous, counter, budgets)
        if label in ticked_labels or label in added or isinstance(item, Problem):
            continue
        cost = counter.count(item.text)
        if used + cost - sum(c for _, c in plain) > budgets.memo_total:
            continue  # not even with every plain line gone
        while used + cost > budgets.memo_total:
            gone, freed = plain.pop(0)
            let_go.append(gone)
            used -= freed
        used += cost
        added.append(label)
    while added and total((ticked_labels - set(let_go)) | set(added)) > budgets.memo_total:
        added.pop()  # counted apart, lines can differ from the memo built (a sentence its whole holds)
    return RulesKept(tuple(added), tuple(let_go))


# ---- the user's newest words and what revokes a kept rule (issue 32 item 4) ----------------------------
#
# rules_kept keeps rule-WORDED sentences; a rule worded without any of those words ("dont use /tmp keep
# everything within the claude dir", a real session's newest rule) left with the model's untick. So every
# user message moving out now is kept whole as well, newest first, as a handoff copies the user's recent
# messages (4d) - after the rules, before the chatter the model ticked that is older. And a rule never stays
# as if in force when the user changed it later (N3, P3): a later user message about the same thing (one
# of the rule's own content words, not a list of rule words) stays beside it, or the rule is let go.


MIN_NEWEST_WORDS: Final = 3  # a shorter reply means nothing alone (N3): not kept for its recency


def subject_words(text: str) -> set[str]:
    """What a message is about: its content words of four letters or more that are no rule wording."""
    return {w for w in _content_words(text) if len(w) >= 4 and not reads_as_rule(w)}


def _line_text(label: Label, entries: Mapping[int, Entry], previous: Mapping[Label, MemoItem]) -> str:
    seq, part = _order(label)
    entry = entries.get(seq)
    if entry is None:
        item = previous.get(label)
        return item.text if item else ""
    spans = sentences(entry.text)
    return entry.text if part == 0 or part > len(spans) else entry.text[slice(*spans[part - 1])]


@dataclass(frozen=True, slots=True)
class NewestKept:
    added: tuple[Label, ...]  # lines kept besides what was chosen before: newest first
    let_go: tuple[Label, ...] = ()  # lines chosen before that gave way to newer words of the user's
    labels: frozenset[Label] = frozenset()  # the memo's lines after this step
    beside: tuple[Label, ...] = ()  # of `labels`: messages still in the conversation copied beside a line


def newest_kept(
    candidates: Sequence[Candidate],
    chosen: Collection[Label],
    entries: Mapping[int, Entry],
    counter: TokenCounter,
    budgets: Budgets,
    previous_memo: Sequence[MemoItem] = (),
    first: Collection[Label] = (),
    live: Collection[int] = (),
) -> NewestKept:
    """The memo's lines after the user's newest words are settled around `chosen` (the ticks as rules_kept
    left them), within the budget:

    1. every later user message about the same thing as a kept rule (its revocation or re-grant, in any
       order) is kept with it; when it cannot fit, the rule it may revoke is let go instead (left out);
    2. every user message moving out now that no line holds is kept whole, newest first; room is made by
       letting go ticked lines that state no rule and are older (oldest first);
    3. a user message still in the conversation (`live`: record numbers of user entries in `entries`)
       that is later than a kept line other than the mission's source and about the same thing
       (`changes_beside`) is copied beside it, where it fits without letting anything go.
    `first` (the mission's source) is never let go. Pure; candidates are user entries by stored kind (N7)."""
    previous = dict(zip(memo_labels(previous_memo, entries), previous_memo, strict=True))
    kept = set(clean_labels(chosen)) | set(clean_labels(first))
    protected = set(clean_labels(first))
    added: list[Label] = []
    let_go: list[Label] = []
    left_out: set[Label] = set()  # rules let go because their change could not be shown: not re-added
    by_label = {c.label: c for c in candidates}

    def total(labels: Collection[Label]) -> int:
        return memo_tokens(build_memo(labels, entries, counter, budgets, previous_memo).items, counter)

    def is_rule(label: Label) -> bool:
        return label in protected or reads_as_rule(_line_text(label, entries, previous))

    def held(label: Label) -> bool:
        return label in kept or (
            type(label) is int and label in {_order(k)[0] for k in kept if k in by_label}
        )

    def changes_a_rule(label: Label) -> bool:
        """A later message about the same thing as a kept rule: it stays as long as the rule does."""
        about = subject_words(_line_text(label, entries, previous))
        return any(
            _order(k)[0] < _order(label)[0] and about & subject_words(_line_text(k, entries, previous))
            for k in kept
            if k in by_label and is_rule(k)
        )

    def make_room(label: Label, older_than: tuple[int, int]) -> bool:
        """Let go kept lines that state no rule, change none, and come before `older_than`, oldest first,
        until `label` fits; False when it cannot."""
        while total(kept | {label}) > budgets.memo_total:
            out = sorted((k for k in kept if k not in protected and not is_rule(k)), key=_order)
            out = [k for k in out if _order(k) < older_than and not changes_a_rule(k)]
            if not out:
                return False
            kept.discard(out[0])
            let_go.append(out[0])
        return True

    def unshown_change(rule: Label) -> Label | None:
        """The first later user message about the same thing as `rule` that no memo line holds."""
        about = subject_words(_line_text(rule, entries, previous))
        later = [c.label for c in candidates if c.seq > _order(rule)[0] and (c.part == 0 or c.kept)]
        for label in sorted(set(later), key=_order):
            if not held(label) and about & subject_words(_line_text(label, entries, previous)):
                return label
        return None

    def kept_rules(mission_too: bool = False) -> list[Label]:
        rules = (k for k in kept if k in by_label and (mission_too or k not in protected) and is_rule(k))
        return sorted(rules, key=_order)

    # 1. a kept rule and the user's later words about it (N3, P3): newest rules first
    for rule in reversed(kept_rules(mission_too=True)):
        while rule in kept and (change := unshown_change(rule)) is not None:
            if make_room(change, _order(change)):
                kept.add(change)
                added.append(change)
            elif rule in protected:  # the mission's source stays (its entry's status says the change)
                break
            else:  # the change cannot be shown: the rule is left out, never alone
                kept.discard(rule)
                let_go.append(rule)
                left_out.add(rule)
    # 2. the newest user messages moving out now, whole (4d), but N3's replies that mean nothing alone:
    # under MIN_NEWEST_WORDS words, or only pleasantries, go-aheads and questions for information
    # (`says_nothing_that_stays`). 3. what 2
    # added may leave a rule without its change once more: such a rule goes too, and the room it frees
    # goes to the newest words again
    moving = sorted((c for c in candidates if c.part == 0 and not c.kept), key=lambda c: -c.seq)
    for _ in range(len(moving) + 1):
        for c in moving:
            short = len(c.text.split()) < MIN_NEWEST_WORDS or says_nothing_that_stays(c.text)
            gone = c.label in left_out and unshown_change(c.label) is not None  # still without its change
            if held(c.label) or gone or c.seq not in entries or short:
                continue
            if not make_room(c.label, (c.seq, 0)):
                break  # newest first while they fit: an older message never takes a newer one's place
            kept.add(c.label)
            added.append(c.label)
        stale = [rule for rule in kept_rules() if unshown_change(rule) is not None]
        if not stale:
            break
        kept.difference_update(stale)
        let_go.extend(stale)
        left_out.update(stale)
    # 4. the user's later words on a kept line, still in the conversation, copied beside it (N3, P3)
    beside: list[Label] = []
    lines = sorted((k for k in kept if k not in protected), key=_order)
    for seq in sorted(set(live) - {_order(k)[0] for k in kept}):
        text = _line_text(seq, entries, previous)
        if len(text.split()) < MIN_NEWEST_WORDS or says_nothing_that_stays(text):
            continue
        if (
            any(_order(k)[0] < seq and changes_beside(_line_text(k, entries, previous), text) for k in lines)
            and total(kept | {seq}) <= budgets.memo_total
        ):
            kept.add(seq)
            beside.append(seq)
    # a line let go and added back is neither
    back = set(added) & set(let_go)
    return NewestKept(
        tuple(a for a in added if a not in back),
        tuple(g for g in let_go if g not in back),
        frozenset(kept),
        tuple(beside),
    )


BESIDE_SHARED_WORDS: Final = 2  # content words a later message must share with a line to be copied beside it


def changes_beside(line: str, later: str) -> bool:
    """Whether the user's `later` message, still in the conversation, is about the same thing as a memo
    `line` closely enough to be copied beside it: it shares two of the line's subject words (all of them
    when the line has fewer). Stricter than a rule's change (one word): the message is in the
    conversation anyway, so a copy only puts it where a small model reads it with the line - the eval's
    0.5B answered the memo's "Set ... to 48" under the live "I meant ... 16, not 48", and 16 with the
    correction copied beside it."""
    about = subject_words(line)
    shared = about & subject_words(later)
    return bool(shared) and len(shared) >= min(BESIDE_SHARED_WORDS, len(about))


# a sentence that takes back or replaces what the user said before: "Correction: I meant ... 16, not 48",
# "scratch that", "use uv instead" (not "instead of": an alternative within one request), "no longer"
_CORRECTION: Final = re.compile(
    r"\b(?:correction|i meant|scratch that|change of plan|instead(?! of)|no longer|"
    r"i take (?:that|it) back|cancel that|never mind|(?:forget|ignore|disregard) (?:what i said|that|my "
    r"(?:earlier|last|previous))|not (?:\$?\d[\w.,]*|[\w./-]*[/_.\d][\w./-]*)\W*$)",
    re.IGNORECASE,
)
CORRECTION_SHARE: Final = 0.4  # of the correcting sentence's subject words, shared with the line


def corrects(line: str, later: str) -> bool:
    """Whether the user's `later` message changes a memo `line` said before: a sentence of it is worded
    as a correction or a taking back ("Correction: I meant ... must be 16, not 48", "use uv instead",
    "I take that back: ...") and is about the same thing as the line - two of the line's subject words
    (`changes_beside`) and CORRECTION_SHARE of its own, so a long brief that shares a few words with the
    line is not read as changing it. The recollection then says so beside both (issue 31 item 3): the
    0.5B, shown "Set ... to 48" and "Correction: ... 16, not 48" in order, wrote 48 at K = 4 in two seeds
    of three."""
    about = subject_words(line)
    for start, end in sentences(later):
        sentence = later[start:end]
        if not _CORRECTION.search(sentence) or not changes_beside(line, sentence):
            continue
        own = subject_words(sentence)
        if len(own & about) >= CORRECTION_SHARE * len(own):
            return True
    return False


def over_budget_problem(total: int, budget: int) -> Problem:
    return Problem(
        "memo.over_budget",
        f"The ticked messages total {total} tokens; the memo holds at most "
        f"{budget}. Untick the ones that are done, superseded or already in the mind.",
    )
