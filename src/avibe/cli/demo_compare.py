"""The demo's side by side: for the same transcript, what Avibe's checkpoint carried and what the two
peer strategies of the eval (`rewrite`, Claude Code style; `handoff`, Codex style) carry when run on it.

    checkpoint_column(stored) -> str                 the mission, the memo's items with their numbers, scene
    rule_rows(rules, memo, columns) -> list[str]     each user rule: kept verbatim or LOST, per column
    side_by_side(columns, width) -> list[str]        the columns wrapped next to each other, each capped
    loop_start(text) -> int | None                   where a text starts repeating itself (a model's loop)
    run_baselines(messages, model, counter, window)  the two summaries (model calls: the only IO here)

A rule counts as kept when its words stand in the column as the user wrote them (case and spacing
ignored): a summary that says "don't touch the vendored code" has the gist, not the rule.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Final

from avibe.checkpoint.mind import mission_lines, strip_guidance
from avibe.evals.baselines import Handoff, Rewrite
from avibe.evals.strategy import SUMMARY_KIND, CompactState
from avibe.ports import ModelClient, TokenCounter
from avibe.record.checkpoint import StoredCheckpoint
from avibe.record.messages import ChatMessage

GAP: Final = " | "
MAX_COLUMN_LINES: Final = 30  # a column's wrapped lines in the report; the rest is counted, not shown
_SENTENCE: Final = re.compile(r"[^\s.!?][^.!?\n]*[.!?]*")
_MIN_LOOP_SENTENCE: Final = 12  # shorter pieces ("Yes.", "1.") repeat in any text


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    text: str


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def kept_verbatim(rule: str, text: str) -> bool:
    """Whether the rule's words stand in `text` as the user wrote them (case and spacing ignored)."""
    return _plain(rule) in _plain(text)


def checkpoint_column(stored: StoredCheckpoint) -> str:
    """What the checkpoint carried: its mission entries, the memo's items with their message numbers,
    and the scene."""
    missions = "\n".join(mission_lines(stored.mind).values()) or "(no mission entry)"
    memo = "\n".join(f"#{item.seq}: {item.text}" for item in stored.memo) or "(empty)"
    scene = strip_guidance(stored.scene).strip() or "(no scene)"
    return f"MISSION\n{missions}\n\nMEMO (the user's words, by message number)\n{memo}\n\nSCENE\n{scene}"


def rule_rows(rules: Sequence[str], memo_seqs: dict[str, int | None], columns: Sequence[Column]) -> list[str]:
    """One line per rule: where each column has it. `memo_seqs` gives the memo item holding each rule
    (None: not in the memo), so the checkpoint's cell names the message number."""
    rows = []
    for rule in rules:
        cells = []
        for column in columns:
            seq = memo_seqs.get(rule) if column.title.startswith("Avibe") else None
            if seq is not None:
                cells.append(f"{column.title}: kept verbatim (memo #{seq})")
            else:
                cells.append(
                    f"{column.title}: " + ("kept verbatim" if kept_verbatim(rule, column.text) else "LOST")
                )
        rows += [f'rule "{rule}"', *(f"    {cell}" for cell in cells)]
    return rows


def memo_seqs(rules: Sequence[str], stored: StoredCheckpoint) -> dict[str, int | None]:
    """For each rule, the number of the memo item that holds it verbatim (None when none does)."""
    return {
        rule: next((item.seq for item in stored.memo if kept_verbatim(rule, item.text)), None)
        for rule in rules
    }


def side_by_side(columns: Sequence[Column], width: int) -> list[str]:
    """The columns' texts wrapped to equal widths and set next to each other (titles first). Each column
    shows at most MAX_COLUMN_LINES lines, and stops where its text starts repeating itself (a small
    model's summary can say one sentence sixty times): a last line says how many lines were left out."""
    inner = max(20, (width - len(GAP) * (len(columns) - 1)) // len(columns))
    wrapped = []
    for column in columns:
        lines = [column.title.upper(), "-" * min(inner, len(column.title))]
        wrapped.append(lines + _capped(column.text, inner))
    return [
        GAP.join(cell.ljust(inner) for cell in row).rstrip() for row in zip_longest(*wrapped, fillvalue="")
    ]


def _wrapped(text: str, inner: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines():
        lines += textwrap.wrap(paragraph, inner, break_long_words=True) or [""]
    return lines


def _capped(text: str, inner: int) -> list[str]:
    """`text` wrapped, up to where it starts to loop and at most MAX_COLUMN_LINES lines, then one note."""
    whole = _wrapped(text, inner)
    loop = loop_start(text)
    shown = _wrapped(text[:loop].rstrip(), inner) if loop is not None else whole
    looped = len(shown) <= MAX_COLUMN_LINES and loop is not None
    shown = shown[:MAX_COLUMN_LINES]
    left = len(whole) - len(shown)
    if left <= 0:
        return whole
    why = "; the text repeats itself from here" if looped else ""
    return shown + textwrap.wrap(f"[... {left} more lines{why}]", inner, break_long_words=True)


def loop_start(text: str) -> int | None:
    """The offset of the first sentence that was said before and from which on at least half of the
    sentences (three or more) repeat earlier ones: where a text runs into a loop. None when it does not."""
    pieces = [(m.start(), _plain(m.group())) for m in _SENTENCE.finditer(text) if _plain(m.group())]
    seen: set[str] = set()
    repeat = []
    for _, piece in pieces:
        repeat.append(piece in seen and len(piece) >= _MIN_LOOP_SENTENCE)
        seen.add(piece)
    later = 0
    ratios: list[float] = [0.0] * len(pieces)
    for index in range(len(pieces) - 1, -1, -1):  # the share of repeats from each sentence on
        later += repeat[index]
        ratios[index] = later / (len(pieces) - index)
    for index, (start, _) in enumerate(pieces):
        if repeat[index] and len(pieces) - index >= 3 and ratios[index] >= 0.5:
            return start
    return None


def _kept_text(messages: Sequence[ChatMessage]) -> str:
    """What a strategy's compacted context carries besides the system prompt, as one text: the copied
    user messages as they stand, then the summary."""
    parts = []
    for message in messages[1:]:
        if message.kind == SUMMARY_KIND:
            parts.append(f"SUMMARY\n{message.content}")
        else:
            parts.append(f"COPIED USER MESSAGE\n{message.content}")
    return "\n\n".join(parts)


def run_baselines(
    messages: Sequence[ChatMessage], model: ModelClient, counter: TokenCounter, window: int, threshold: float
) -> list[Column]:
    """Run the rewrite and handoff strategies on `messages` (system prompt first) with the demo's model."""
    state = CompactState(tuple(messages), (), session="demo", user="user", threshold=threshold)
    columns = []
    for title, strategy in (("rewrite summary", Rewrite()), ("handoff", Handoff())):
        compacted = strategy.compact(state, model, counter, window)
        columns.append(Column(title, _kept_text(compacted.messages)))
    return columns
