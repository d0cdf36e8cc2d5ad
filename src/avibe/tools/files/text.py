"""What read_file, write_file and edit_file share: the ledger of what the model has seen, a file's bytes as
UTF-8 text (refused when binary or not UTF-8), numbered line windows, and the short diffs shown for a
change."""

from __future__ import annotations

import difflib
import hashlib
import io
from pathlib import Path
from typing import Final, Literal

from avibe.errors import ToolError

MAX_LINE_CHARS: Final = 2_000  # one minified line must not fill the output alone
MAX_DIFF_LINES: Final = 40  # edit_file's diff: enough to check the edit, never a whole file
MAX_DIFF_LINE_CHARS: Final = 200
BINARY_PROBE: Final = 8_192

Seen = Literal["fresh", "unread", "changed"]
Binary = io.BufferedReader | io.BufferedRandom  # what os.fdopen gives for "rb" and "r+b"


class ReadLedger:
    """What the model has seen of each file in this session: resolved path -> sha256 of the file's
    bytes when read_file last read it (any window of it) or write_file / edit_file last wrote it.

    One ledger is shared by the session's read_file, write_file and edit_file (`default_tools`), so an
    overwrite can tell a file the model knows from one it never read or that changed under it (the
    user, a shell command, a background job). A hash, not mtime and size: a change within the
    filesystem's timestamp granularity that keeps the size must still count."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def note(self, path: Path, digest: str) -> None:
        self._seen[path] = digest

    def knows(self, path: Path) -> bool:
        return path in self._seen

    def seen(self, path: Path, digest: str) -> Seen:
        """Whether the file, now with content `digest`, is as the model last saw it."""
        if path not in self._seen:
            return "unread"
        return "fresh" if self._seen[path] == digest else "changed"


def digest(f: Binary) -> str:
    """sha256 of the whole open file (from its start; the position is left at the end)."""
    f.seek(0)
    return hashlib.file_digest(f, "sha256").hexdigest()


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_not_binary(head: bytes, raw: str) -> None:
    if b"\x00" in head[:BINARY_PROBE]:
        raise ToolError(f"'{raw}' is a binary file; these tools read and edit text only")


def not_utf8(raw: str, exc: UnicodeDecodeError) -> ToolError:
    return ToolError(f"'{raw}' is not UTF-8 text (byte {exc.start}); these tools handle UTF-8 only")


def decode(data: bytes, raw: str) -> str:
    """The file's whole text, exactly (line endings kept)."""
    check_not_binary(data, raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(raw, exc) from exc


def window(f: Binary, raw: str, offset: int, limit: int) -> tuple[list[str], int]:
    """Lines offset..offset+limit-1 (from 1) and the file's line count, streamed: a huge log is never
    held in memory whole."""
    check_not_binary(f.read(BINARY_PROBE), raw)
    f.seek(0)
    shown: list[str] = []
    total = 0
    text = io.TextIOWrapper(f, encoding="utf-8", newline="")
    try:
        for total, line in enumerate(text, start=1):
            if offset <= total < offset + limit:
                shown.append(line)
    except UnicodeDecodeError as exc:
        raise not_utf8(raw, exc) from exc
    finally:
        text.detach()  # the caller closes the file
    return shown, total


def numbered(lines: list[str], first: int) -> str:
    shown = []
    for number, line in enumerate(lines, start=first):
        text = line.rstrip("\r\n")
        if len(text) > MAX_LINE_CHARS:
            text = f"{text[:MAX_LINE_CHARS]} [line cut: {len(text) - MAX_LINE_CHARS} more chars]"
        shown.append(f"{number:>6}\t{text}")
    return "\n".join(shown)


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def lines_said(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def diff(before: str, after: str, shown: str) -> str:
    """A short unified diff of an edit: at most MAX_DIFF_LINES lines, each cut to MAX_DIFF_LINE_CHARS."""
    lines = [
        line if len(line) <= MAX_DIFF_LINE_CHARS else f"{line[:MAX_DIFF_LINE_CHARS]} [line cut]"
        for line in difflib.unified_diff(
            before.splitlines(), after.splitlines(), f"a/{shown}", f"b/{shown}", n=2, lineterm=""
        )
    ]
    if len(lines) > MAX_DIFF_LINES:
        left = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"[diff cut: {left} more lines; read_file shows the result]"]
    return "\n".join(lines)
