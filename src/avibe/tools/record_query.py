"""record_query: look up the session's record - the user's messages in time order, by number or text
(SPEC A3). Memo entries point at these numbers; what a checkpoint moved out of the context is here.

Entries are rendered `#seq [time] text`; a non-human input keeps its harness-written source tag (T1), so
a looked-up callback never reads as the user. Every line below a header is framed (`│ `), so no text
can pass for another entry's header or for a tag.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import RecordStore, ToolResult
from avibe.record.entries import Entry, EntryQuery
from avibe.record.messages import ToolSpec
from avibe.record.sources import format_time, frame_lines, render_listed
from avibe.tools.base import BaseTool, cut_text, schema

DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 100


def render_entry(entry: Entry) -> str:
    """`#seq [time] text` - the user's words as stored, any other input under its source tag; every
    further line framed."""
    who = "(you) " if entry.kind == "assistant" else ""  # Vibey's own earlier replies
    first, below = render_listed(entry)
    calls = frame_lines("\n".join(f"(you called {c.name} {c.arguments})" for c in entry.calls))
    rest = "\n".join(part for part in (below, *calls) if part)
    header = f"#{entry.seq} [{format_time(entry.at)}] {who}{first}"
    return f"{header}\n{rest}" if rest else header


class RecordQuery(BaseTool):
    """Query one session's record through the RecordStore port."""

    def __init__(self, store: RecordStore, session_id: str) -> None:
        self._store, self._session = store, session_id
        self._spec = ToolSpec(
            name="record_query",
            description=(
                "Look up earlier messages of this conversation in the record, oldest first: by message "
                "number (seq_from/seq_to, e.g. a memo's #12) or by text. Only the user's messages unless "
                "user_only is false. Tool output is not in the record: re-run the tool instead."
            ),
            parameters=schema(
                {
                    "seq_from": ("integer", "first message number to show"),
                    "seq_to": ("integer", "last message number to show"),
                    "text": ("string", "only messages containing this text"),
                    "user_only": ("boolean", "only the user's own messages (default true)"),
                    "limit": (
                        "integer",
                        f"how many messages at most (default {DEFAULT_LIMIT}, max {MAX_LIMIT})",
                    ),
                }
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        query = self._query(args)
        limit = query.limit or DEFAULT_LIMIT
        found = self._store.query(replace(query, limit=limit + 1))  # one more says whether more follow
        if not found:
            return ToolResult(output="(no message in the record matches)")
        body = "\n\n".join(render_entry(e) for e in found[:limit])
        if len(found) > limit:
            body += f"\n\n[more messages follow; use seq_from={found[limit].seq} to see them]"
        return ToolResult(output=cut_text(body, "narrow it with seq_from/seq_to or text"))

    def _query(self, args: dict[str, Any]) -> EntryQuery:
        seq_from, seq_to, limit = args.get("seq_from"), args.get("seq_to"), args.get("limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"record_query: limit must be between 1 and {MAX_LIMIT}, got {limit}")
        if seq_from is not None and seq_to is not None and seq_from > seq_to:
            raise ToolError(f"record_query: seq_from ({seq_from}) is after seq_to ({seq_to})")
        text = args.get("text") or None
        if text is not None and "\x00" in text:
            raise ToolError("record_query: text contains a NUL character; search for printable text")
        return EntryQuery(
            session=self._session,
            kinds=frozenset({"user"}) if args.get("user_only", True) else None,
            seq_from=seq_from,
            seq_to=seq_to,
            text=text,
            limit=limit,
        )
