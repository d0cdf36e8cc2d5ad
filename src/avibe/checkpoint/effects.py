"""What the checkpoint turn and its driver exchange: effects out, results in, inputs and the outcome.

Re-exported by `avibe.checkpoint.turn`, which is where the driver imports them from.

API:
    Effects:  WriteWorkFiles(mind, checklist)   CallModel(messages, tools, json_schema, max_tokens)
              ReadFile(path)
    Results:  ModelReply (avibe.record.messages) | ModelFailure(text)   str | ReadFailed(message)   None
    Mode = Literal["tools", "structured", "three", "grouped"]
    TurnInputs(...)                     see the class
    Accepted(checkpoint, dismissed_seqs, calls, first_pass_problems, repaired, tool_rounds, notes)
    Failed(problems, calls, tool_rounds, first_pass_problems, notes)
    TurnOutcome = Accepted | Failed
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from avibe.checkpoint.budgets import Budgets
from avibe.checkpoint.facts import HarnessFacts
from avibe.checkpoint.model import Checkpoint, Problem
from avibe.ports import TokenCounter
from avibe.record.entries import Entry
from avibe.record.messages import ChatMessage, ModelReply, ToolSpec

# tools: the model edits the work files with tools; structured: one small JSON question a call, under a
# grammar (local models); grouped: the same questions, the mind's and the scene's in one call
Mode = Literal["tools", "structured", "three", "grouped"]


# ---- effects and their results ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteWorkFiles:
    """F2: mirror the two work files into the session's temp dir (at the start, after each accepted edit)."""

    mind: str
    checklist: str


@dataclass(frozen=True, slots=True)
class CallModel:
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    json_schema: Mapping[str, Any] | None
    max_tokens: int


@dataclass(frozen=True, slots=True)
class ReadFile:
    path: str


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """What the driver sends back when the model call raised (a ModelError's text)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReadFailed:
    message: str


Effect = WriteWorkFiles | CallModel | ReadFile
EffectResult = ModelReply | ModelFailure | str | ReadFailed | None


# ---- inputs and outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnInputs:
    """Everything the turn needs; no clock, no IO.

    live_messages:  the conversation exactly as last sent to the model (system prompt, recollection,
                    recent messages); the turn's calls append to it (prompt-cache reuse).
    previous:       the previous checkpoint, or None the first time (empty mind template, empty memo).
    moved_entries:  record entries of the messages that move out (any kind; only "user" ones are memo
                    candidates, N7).
    memo_entries:   record entries behind the previous memo's items, so V3's byte-for-byte check covers
                    them too (without them only the cut-note form of those items is checked).
    live_entries:   record entries of the user's messages that stay in the conversation: one that changes
                    a kept memo line is copied beside it (memo.newest_kept, N3).
    before_entries: the record entries just before the user's messages moving out that moved out earlier:
                    the agent's question a short reply answers (memo.mark_asked, N3).
    dismissed:      seqs unticked at earlier checkpoints, never listed again (N6).
    upto_seq:       the last record number that moves out (named in the request).
    cache_tools:    structured mode: the live conversation's tool specs, offered unchanged so the prompt
                    prefix (which includes tools) stays the cached one; the grammar keeps the model from
                    calling them.
    facts:          what the harness knows (background jobs, files, the last failing call): added to the
                    scene next to what the model wrote, and checked by validation (S3, S6).
    """

    mode: Mode
    live_messages: tuple[ChatMessage, ...]
    previous: Checkpoint | None
    moved_entries: tuple[Entry, ...]
    budgets: Budgets
    counter: TokenCounter
    at: datetime
    mind_path: str = "mind.md"
    checklist_path: str = "memo.md"
    memo_entries: tuple[Entry, ...] = ()
    live_entries: tuple[Entry, ...] = ()
    before_entries: tuple[Entry, ...] = ()
    dismissed: frozenset[int] = frozenset()
    upto_seq: int | None = None
    max_tokens: int = 2048
    cache_tools: tuple[ToolSpec, ...] = ()
    facts: HarnessFacts = field(default_factory=HarnessFacts)


@dataclass(frozen=True, slots=True)
class Accepted:
    checkpoint: Checkpoint
    dismissed_seqs: frozenset[int]
    calls: int
    first_pass_problems: tuple[Problem, ...]
    repaired: bool
    tool_rounds: int = 0
    notes: tuple[str, ...] = ()  # harness decisions worth logging (e.g. an out-of-range answer dropped)


@dataclass(frozen=True, slots=True)
class Failed:
    """V4/V5: the turn failed; it carries no partial state, so nothing changes."""

    problems: tuple[Problem, ...]
    calls: int
    tool_rounds: int = 0
    first_pass_problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()


TurnOutcome = Accepted | Failed
