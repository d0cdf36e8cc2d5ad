"""read_file, write_file, edit_file: text files inside the paths a PathPolicy allows.

Each reports the files it read or changed (`files_read`, `files_modified`) so the checkpoint can carry
the recent-files list (SPEC A2). Edits are exact string replacements: `old` must occur exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.base import MAX_OUTPUT_CHARS, BaseTool, PathPolicy, cut_text, schema

DEFAULT_READ_LINES: Final = 400
MAX_LINE_CHARS: Final = 2_000  # one minified line must not fill the output alone
_BINARY_PROBE: Final = 8_192


def _check_text_file(path: Path, raw: str) -> None:
    """ToolError for a folder, a missing file or a binary file (a NUL byte near the start)."""
    if path.is_dir():
        raise ToolError(f"'{raw}' is a directory; use list_files to see what it holds")
    if not path.exists():
        raise ToolError(f"'{raw}' does not exist; use list_files or search_files to find the right path")
    with path.open("rb") as f:
        if b"\x00" in f.read(_BINARY_PROBE):
            raise ToolError(f"'{raw}' is a binary file; these tools read and edit text only")


def _not_utf8(raw: str, exc: UnicodeDecodeError) -> ToolError:
    return ToolError(f"'{raw}' is not UTF-8 text (byte {exc.start}); these tools handle UTF-8 only")


def _text_of(path: Path, raw: str) -> str:
    """The file's whole text, exactly (line endings kept)."""
    _check_text_file(path, raw)
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc) from exc


def _window(path: Path, raw: str, offset: int, limit: int) -> tuple[list[str], int]:
    """Lines offset..offset+limit-1 (from 1) and the file's line count, streamed: a huge log is never
    held in memory whole."""
    _check_text_file(path, raw)
    shown: list[str] = []
    total = 0
    try:
        with path.open(encoding="utf-8", newline="") as f:
            for total, line in enumerate(f, start=1):
                if offset <= total < offset + limit:
                    shown.append(line)
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc) from exc
    return shown, total


def _numbered(lines: list[str], first: int) -> str:
    shown = []
    for number, line in enumerate(lines, start=first):
        text = line.rstrip("\r\n")
        if len(text) > MAX_LINE_CHARS:
            text = f"{text[:MAX_LINE_CHARS]} [line cut: {len(text) - MAX_LINE_CHARS} more chars]"
        shown.append(f"{number:>6}\t{text}")
    return "\n".join(shown)


class ReadFile(BaseTool):
    """Text with line numbers, a window of lines at a time."""

    def __init__(self, policy: PathPolicy) -> None:
        self._policy = policy
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
        path = self._policy.readable(args["path"])
        offset, limit = args.get("offset", 1), args.get("limit", DEFAULT_READ_LINES)
        if offset < 1 or limit < 1:
            raise ToolError("read_file: offset and limit must be 1 or more")
        shown, total = _window(path, args["path"], offset, limit)
        return ToolResult(output=self._render(total, shown, offset), files_read=(self._policy.show(path),))

    def _render(self, total: int, shown: list[str], offset: int) -> str:
        if not total:
            return "(empty file)"
        if not shown:
            return f"(the file has {total} lines; offset {offset} is past the end)"
        body = cut_text(_numbered(shown, offset), "use offset/limit or grep", MAX_OUTPUT_CHARS)
        last = offset + len(shown) - 1
        if last < total:
            body += f"\n[lines {offset}-{last} of {total}; use offset={last + 1} to read on]"
        return body


class WriteFile(BaseTool):
    """Create or overwrite a whole file; parent folders are created."""

    def __init__(self, policy: PathPolicy) -> None:
        self._policy = policy
        self._spec = ToolSpec(
            name="write_file",
            description=(
                "Write a whole text file (created with its folders, or overwritten). "
                "To change part of an existing file, use edit_file."
            ),
            parameters=schema(
                {
                    "path": ("string", "file path, relative to the working directory"),
                    "content": ("string", "the complete new content of the file"),
                },
                required=["path", "content"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        path = self._policy.writable(args["path"])
        if path.is_dir():
            raise ToolError(f"'{args['path']}' is a directory; give a file path")
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        data = args["content"].encode("utf-8")
        path.write_bytes(data)
        shown = self._policy.show(path)
        verb = "overwrote" if existed else "created"
        content = args["content"]
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        return ToolResult(
            output=f"{verb} {shown} ({len(data)} bytes, {lines} lines)", files_modified=(shown,)
        )


class EditFile(BaseTool):
    """Replace one exact occurrence of a string."""

    def __init__(self, policy: PathPolicy) -> None:
        self._policy = policy
        self._spec = ToolSpec(
            name="edit_file",
            description=(
                "Edit a text file: replace the exact text `old` (which must occur exactly once; copy it "
                "from read_file without the line numbers, whitespace included) with `new`."
            ),
            parameters=schema(
                {
                    "path": ("string", "file path, relative to the working directory"),
                    "old": ("string", "the exact text to replace; must occur once in the file"),
                    "new": ("string", "the text to put in its place"),
                },
                required=["path", "old", "new"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        raw, old, new = args["path"], args["old"], args["new"]
        path = self._policy.writable(raw)
        if not old:
            raise ToolError("edit_file: `old` is empty; give the exact text to replace")
        if old == new:
            raise ToolError("edit_file: `old` and `new` are the same; nothing would change")
        text = _text_of(path, raw)
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"edit_file: `old` was not found in {raw}; read the file and copy the exact text "
                "(whitespace and line breaks matter, line numbers are not part of the text)"
            )
        if count > 1:
            raise ToolError(
                f"edit_file: `old` occurs {count} times in {raw}; include more of the surrounding "
                "lines so it occurs exactly once"
            )
        start = text.index(old)
        path.write_bytes((text[:start] + new + text[start + len(old) :]).encode("utf-8"))
        shown = self._policy.show(path)
        first = text.count("\n", 0, start) + 1
        last = first + new.count("\n")
        return ToolResult(
            output=f"edited {shown}: replaced 1 occurrence (now lines {first}-{last})",
            files_modified=(shown,),
        )
