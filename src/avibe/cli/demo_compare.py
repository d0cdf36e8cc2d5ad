"""The demo's side by side: for the same transcript, what Avibe's checkpoint carried and what the two
peer strategies of the eval (`rewrite`, Claude Code style; `handoff`, Codex style) carry when run on it.

    checkpoint_column(stored) -> str                 the mission, the memo's items with their numbers, scene
    rule_rows(rules, memo, columns) -> list[str]     each user rule: kept verbatim or LOST, per column
    side_by_side(columns, width) -> list[str]        the columns wrapped next to each other
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
    """The columns' texts wrapped to equal widths and set next to each other (titles first)."""
    inner = max(20, (width - len(GAP) * (len(columns) - 1)) // len(columns))
    wrapped = []
    for column in columns:
        lines = [column.title.upper(), "-" * min(inner, len(column.title))]
        for paragraph in column.text.splitlines():
            lines += textwrap.wrap(paragraph, inner, break_long_words=True) or [""]
        wrapped.append(lines)
    return [
        GAP.join(cell.ljust(inner) for cell in row).rstrip() for row in zip_longest(*wrapped, fillvalue="")
    ]


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
