"""write_file: create a file, overwrite one the model has read and that has not changed since, or append.

A tool that does not destroy work, as in Claude Code: an existing file is overwritten only when the
model has read it in this session and it has not changed since (the `ReadLedger`); appending (for logs
and changelogs) and creating a file need no read. Files are opened without following links and never
changed through a second hard link (PathPolicy); with an `ApprovalPolicy` the change is approved first
(files/preview.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import BaseTool, PathPolicy, schema
from avibe.tools.files.preview import approved, same_path, write_preview
from avibe.tools.files.text import Binary, ReadLedger, digest, digest_of, line_count
from avibe.tools.undo import Snapshots

WRITE_MODES: Final = ("overwrite", "append")


class WriteFile(BaseTool):
    """Create a file, overwrite one the model has read (and that has not changed since), or append."""

    def __init__(
        self,
        policy: PathPolicy,
        ledger: ReadLedger | None = None,
        approval: ApprovalPolicy | None = None,
        snapshots: Snapshots | None = None,  # each file as it was before the turn changed it (/undo)
    ) -> None:
        self._policy = policy
        self._ledger = ledger or ReadLedger()
        self._approval = approval
        self._snapshots = snapshots
        self._spec = ToolSpec(
            name="write_file",
            description=(
                "Write a whole text file (created with its folders). An existing file is overwritten "
                "only after you read it with read_file; mode=append adds to its end instead (logs, "
                "changelogs; no read needed). To change part of a file, use edit_file."
            ),
            parameters=schema(
                {
                    "path": ("string", "file path, relative to the working directory"),
                    "content": ("string", "the complete new content (with mode=append: the text to add)"),
                    "mode": ("string", "overwrite (default) or append"),
                },
                required=["path", "content"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        raw, content, mode = args["path"], args["content"], args.get("mode", "overwrite").strip().lower()
        if mode not in WRITE_MODES:
            raise ToolError(f"write_file: mode must be overwrite or append, got {mode!r:.40}")
        flags = os.O_RDWR | (os.O_APPEND if mode == "append" else 0)
        checked = approved(self._approval, self._policy, "write_file", raw, write_preview(content, mode))
        path, fd, created = self._policy.open_writable(raw, flags, create=True)
        with os.fdopen(fd, "r+b") as f:
            if checked is not None and path != checked and created:
                os.unlink(path)  # created where a link swapped in meanwhile led: not what was approved
            same_path(checked, path, raw)
            if self._snapshots is not None:
                self._snapshots.before(path, self._policy.show(path), None if created else f.read())
                f.seek(0)
            if created:
                verb, data = "created", self._put(f, content)
            elif mode == "append":
                verb, data = "appended to", self._append(f, path, content)
            else:
                verb, data = "overwrote", self._overwrite(f, path, raw, content)
            f.flush()
            if verb != "appended to":  # the model wrote all of it: it knows the whole file
                self._ledger.note(path, digest_of(data))
        if self._snapshots is not None:
            self._snapshots.after(path)
        shown = self._policy.show(path)
        lines = line_count(content)
        return self.report({**args, "path": shown}, f"{verb} {shown} ({len(data)} bytes, {lines} lines)")

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return ToolResult(output=output, files_modified=(str(args["path"]),))

    def _overwrite(self, f: Binary, path: Path, raw: str, content: str) -> bytes:
        seen = self._ledger.seen(path, digest(f))
        if f.tell() and seen != "fresh":  # an empty file has nothing to lose
            why = (
                "you have not read it in this session" if seen == "unread" else "it changed since you read it"
            )
            raise ToolError(
                f"write_file: '{raw}' exists and {why}; overwriting would replace all of it. Read it "
                "with read_file first, change part of it with edit_file, or add to its end with "
                "mode=append."
            )
        f.seek(0)
        f.truncate()
        return self._put(f, content)

    @staticmethod
    def _put(f: Binary, content: str) -> bytes:
        data = content.encode("utf-8")
        f.write(data)
        return data

    def _append(self, f: Binary, path: Path, content: str) -> bytes:
        """Append (the file is open with O_APPEND); a line break goes first when the file does not end
        with one, so a log's last line is not run on. The ledger follows only a file the model knew."""
        fresh = self._ledger.knows(path) and self._ledger.seen(path, digest(f)) == "fresh"
        size = f.seek(0, os.SEEK_END)
        if size and not content.startswith("\n"):
            f.seek(size - 1)
            if f.read(1) != b"\n":
                content = "\n" + content
        data = self._put(f, content)
        if fresh:
            f.flush()
            self._ledger.note(path, digest(f))
        return data
