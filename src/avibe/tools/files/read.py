"""read_file: a window of a text file's lines, numbered; what the model saw goes in the ledger."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.base import MAX_OUTPUT_CHARS, BaseTool, PathPolicy, cut_text, schema
from avibe.tools.files.text import ReadLedger, digest, numbered, window

DEFAULT_READ_LINES: Final = 400


class ReadFile(BaseTool):
    """Text with line numbers, a window of lines at a time; notes what the model saw in the ledger."""

    def __init__(self, policy: PathPolicy, ledger: ReadLedger | None = None) -> None:
        self._policy = policy
        self._ledger = ledger or ReadLedger()
        self._spec = ToolSpec(
            name="read_file",
            description=(
                "Read a text file; lines come numbered. Reads up to 400 lines: use offset (first line, "
                "from 1) and limit (number of lines) for the rest of a long file."
            ),
            parameters=schema(
                {
                    "path": ("string", "file path, relative to the working directory"),
                    "offset": ("integer", "first line to show, from 1 (default 1)"),
                    "limit": ("integer", f"how many lines to show (default {DEFAULT_READ_LINES})"),
                },
                required=["path"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        offset, limit = args.get("offset", 1), args.get("limit", DEFAULT_READ_LINES)
        if offset < 1 or limit < 1:
            raise ToolError("read_file: offset and limit must be 1 or more")
        path, fd = self._policy.open_readable(args["path"])
        with os.fdopen(fd, "rb") as f:
            shown, total = window(f, args["path"], offset, limit)
            self._ledger.note(path, digest(f))
        return self.report({**args, "path": self._policy.show(path)}, self._render(total, shown, offset))

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return ToolResult(output=output, files_read=(str(args["path"]),))

    def _render(self, total: int, shown: list[str], offset: int) -> str:
        if not total:
            return "(empty file)"
        if not shown:
            return f"(the file has {total} lines; offset {offset} is past the end)"
        body = cut_text(numbered(shown, offset), "use offset/limit or grep", MAX_OUTPUT_CHARS)
        last = offset + len(shown) - 1
        if last < total:
            body += f"\n[lines {offset}-{last} of {total}; use offset={last + 1} to read on]"
        return body
