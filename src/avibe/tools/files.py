"""read_file, write_file, edit_file: text files inside the paths a PathPolicy allows.

Each reports the files it read or changed (`files_read`, `files_modified`) so the checkpoint can carry
the recent-files list (SPEC A2). Edits are exact string replacements: `old` must occur exactly once,
and the result shows a short diff.

Tools that do not destroy work, as in Claude Code: write_file overwrites an existing file
only when the model has read it in this session and it has not changed since (a `ReadLedger` shared
by the three tools); appending (for logs and changelogs) and creating a file need no read. Files are
opened without following links and never changed through a second hard link (PathPolicy).
With an `ApprovalPolicy` (avibe/tools/approval.py), write_file and edit_file refuse a
path the person's deny rules cover, and in ask mode wait for the person's approval, before anything is
opened for writing. The PathPolicy carries the session's sandbox: in read-only nothing is
changed, and Avibe's own files are neither read nor changed in the sandboxed modes; what a deny rule
matches is refused by identity too, so a renamed parent does not get around it.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.sources.agent_files import read_agent_file
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import MAX_OUTPUT_CHARS, BaseTool, PathPolicy, cut_text, schema
from avibe.tools.undo import Snapshots

DEFAULT_READ_LINES: Final = 400
MAX_LINE_CHARS: Final = 2_000  # one minified line must not fill the output alone
MAX_DIFF_LINES: Final = 40  # edit_file's diff: enough to check the edit, never a whole file
MAX_DIFF_LINE_CHARS: Final = 200
WRITE_MODES: Final = ("overwrite", "append")
_BINARY_PROBE: Final = 8_192
MAX_PREVIEW_BYTES: Final = 2_000_000  # a larger file is not read to show a diff before approval

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


Preview = Callable[[Path, str], tuple[str, str]]  # (resolved path, shown path) -> (detail, diff)


def _approved(
    approval: ApprovalPolicy | None, policy: PathPolicy, tool: str, raw: str, preview: Preview
) -> Path | None:
    """The resolved path once the approval policy lets `tool` change it (None without a policy);
    ToolError naming the rule, or the person's refusal, otherwise. In ask mode the person sees the
    change first: a diff, or a new file's lines (`preview`, run only when someone will be asked)."""
    if approval is None:
        return None
    path = policy.writable(raw)
    shown = policy.show(path)
    detail, diff = preview(path, shown) if approval.mode == "ask" else ("", "")
    approval.check_write(tool, shown, detail, diff)
    return path


def _current_text(path: Path) -> str | None:
    """The file's text as it is now, for a preview; None when there is none to show (missing, too large,
    binary, not UTF-8, or a link swapped in since the path was checked: read the one safe way)."""
    found = read_agent_file(path.parent, path.name, max_bytes=MAX_PREVIEW_BYTES)
    return found.text if found.ok else None


def _added(content: str, shown: str) -> str:
    """A new file's (or an append's) lines as a diff of additions, cut like `_diff`."""
    return _diff("", content, shown)


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def _write_preview(content: str, mode: str) -> Preview:
    def preview(path: Path, shown: str) -> tuple[str, str]:
        lines = _lines(_line_count(content))
        if not path.exists():
            return f"new file, {lines}", _added(content, shown)
        if mode == "append":
            return f"append {lines}", _added(content, shown)
        before = _current_text(path)
        if before is None:
            return f"overwrite with {lines}; no diff (a binary or large file)", ""
        return f"overwrite: {_lines(_line_count(before))} become {lines}", _diff(before, content, shown)

    return preview


def _edit_preview(old: str, new: str) -> Preview:
    def preview(path: Path, shown: str) -> tuple[str, str]:
        before = _current_text(path)
        if before is None or before.count(old) != 1:
            return f"replace {len(old)} chars", ""  # the edit itself says what is wrong
        return "edit", _diff(before, before.replace(old, new, 1), shown)

    return preview


def _same_path(checked: Path | None, opened: Path, raw: str) -> None:
    """The path opened is the one approved (a link swapped in between would resolve elsewhere)."""
    if checked is not None and checked != opened:
        raise ToolError(f"'{raw}' changed while it was checked (now {opened}); try again")


def _digest(f: Binary) -> str:
    """sha256 of the whole open file (from its start; the position is left at the end)."""
    f.seek(0)
    return hashlib.file_digest(f, "sha256").hexdigest()


def _digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_not_binary(head: bytes, raw: str) -> None:
    if b"\x00" in head[:_BINARY_PROBE]:
        raise ToolError(f"'{raw}' is a binary file; these tools read and edit text only")


def _not_utf8(raw: str, exc: UnicodeDecodeError) -> ToolError:
    return ToolError(f"'{raw}' is not UTF-8 text (byte {exc.start}); these tools handle UTF-8 only")


def _decode(data: bytes, raw: str) -> str:
    """The file's whole text, exactly (line endings kept)."""
    _check_not_binary(data, raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc) from exc


def _window(f: Binary, raw: str, offset: int, limit: int) -> tuple[list[str], int]:
    """Lines offset..offset+limit-1 (from 1) and the file's line count, streamed: a huge log is never
    held in memory whole."""
    _check_not_binary(f.read(_BINARY_PROBE), raw)
    f.seek(0)
    shown: list[str] = []
    total = 0
    text = io.TextIOWrapper(f, encoding="utf-8", newline="")
    try:
        for total, line in enumerate(text, start=1):
            if offset <= total < offset + limit:
                shown.append(line)
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc) from exc
    finally:
        text.detach()  # the caller closes the file
    return shown, total


def _numbered(lines: list[str], first: int) -> str:
    shown = []
    for number, line in enumerate(lines, start=first):
        text = line.rstrip("\r\n")
        if len(text) > MAX_LINE_CHARS:
            text = f"{text[:MAX_LINE_CHARS]} [line cut: {len(text) - MAX_LINE_CHARS} more chars]"
        shown.append(f"{number:>6}\t{text}")
    return "\n".join(shown)


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _diff(before: str, after: str, shown: str) -> str:
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
            shown, total = _window(f, args["path"], offset, limit)
            self._ledger.note(path, _digest(f))
        return self.report({**args, "path": self._policy.show(path)}, self._render(total, shown, offset))

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return ToolResult(output=output, files_read=(str(args["path"]),))

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
        checked = _approved(self._approval, self._policy, "write_file", raw, _write_preview(content, mode))
        path, fd, created = self._policy.open_writable(raw, flags, create=True)
        with os.fdopen(fd, "r+b") as f:
            if checked is not None and path != checked and created:
                os.unlink(path)  # created where a link swapped in meanwhile led: not what was approved
            _same_path(checked, path, raw)
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
                self._ledger.note(path, _digest_of(data))
        if self._snapshots is not None:
            self._snapshots.after(path)
        shown = self._policy.show(path)
        lines = _line_count(content)
        return self.report({**args, "path": shown}, f"{verb} {shown} ({len(data)} bytes, {lines} lines)")

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return ToolResult(output=output, files_modified=(str(args["path"]),))

    def _overwrite(self, f: Binary, path: Path, raw: str, content: str) -> bytes:
        seen = self._ledger.seen(path, _digest(f))
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
        fresh = self._ledger.knows(path) and self._ledger.seen(path, _digest(f)) == "fresh"
        size = f.seek(0, os.SEEK_END)
        if size and not content.startswith("\n"):
            f.seek(size - 1)
            if f.read(1) != b"\n":
                content = "\n" + content
        data = self._put(f, content)
        if fresh:
            f.flush()
            self._ledger.note(path, _digest(f))
        return data


class EditFile(BaseTool):
    """Replace one exact occurrence of a string; the result shows a short diff."""

    def __init__(
        self,
        policy: PathPolicy,
        ledger: ReadLedger | None = None,
        approval: ApprovalPolicy | None = None,
        snapshots: Snapshots | None = None,
    ) -> None:
        self._policy = policy
        self._ledger = ledger or ReadLedger()
        self._approval = approval
        self._snapshots = snapshots
        self._spec = ToolSpec(
            name="edit_file",
            description=(
                "Edit a text file: replace the exact text `old` (which must occur exactly once; copy it "
                "from read_file without the line numbers, whitespace included) with `new`. An empty `old` "
                "on a file that does not exist yet creates it with `new`."
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

    def _as_it_is(self, raw: str, old: str) -> str:
        """`as_it_is` for a file not yet opened: read through the same policy as read_file; any refusal
        or error means no hint (the edit's own error stands)."""
        try:
            _, fd = self._policy.open_readable(raw)
            with os.fdopen(fd, "rb") as f:
                text = _decode(f.read(SHOWN_WHOLE_CHARS * 8 + 1), raw)
        except (OSError, ToolError):
            return ""
        return as_it_is(text, old, raw)

    def _run(self, args: dict[str, Any]) -> ToolResult:
        raw, old, new = args["path"], args["old"], args["new"]
        if not old:
            if not self._policy.writable(raw).exists():  # small models create files this way
                return WriteFile(self._policy, self._ledger, self._approval, self._snapshots).run(
                    {"path": raw, "content": new}
                )
            raise ToolError(
                f"edit_file: `old` is empty and {raw} exists; give the exact text to replace, or use "
                "write_file with mode=append to add to its end"
            )
        if old == new:
            raise ToolError(  # the 1.5B sent old="color" new="color" to change "colour", then said done
                "edit_file: `old` and `new` are the same; nothing would change, and nothing was changed. "
                "`old` is the text as it is now in the file, `new` the text to put there."
                + self._as_it_is(raw, old)
            )
        checked = _approved(self._approval, self._policy, "edit_file", raw, _edit_preview(old, new))
        path, fd, _ = self._policy.open_writable(raw, os.O_RDWR)
        with os.fdopen(fd, "r+b") as f:
            _same_path(checked, path, raw)
            before = f.read()
            text = _decode(before, raw)
            start = _only_occurrence(text, old, raw)
            after = text[:start] + new + text[start + len(old) :]
            if self._snapshots is not None:
                self._snapshots.before(path, self._policy.show(path), before)
            f.seek(0)
            f.truncate()
            f.write(after.encode("utf-8"))
        if self._snapshots is not None:
            self._snapshots.after(path)
        # An edit proves the model knew `old`, not the whole file: the ledger follows only a file it knew.
        if self._ledger.seen(path, _digest_of(before)) == "fresh":
            self._ledger.note(path, _digest_of(after.encode("utf-8")))
        shown = self._policy.show(path)
        first = text.count("\n", 0, start) + 1
        last = first + new.count("\n")
        said = f"edited {shown}: replaced 1 occurrence (now lines {first}-{last})\n"
        said += _diff(text, after, shown)
        return self.report({**args, "path": shown}, said)

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return WriteFile.report(args, output)


NEAREST_MIN_RATIO: Final = 0.5  # below this a line is not "near" `old`: saying nothing beats misleading
NEAREST_LINE_CHARS: Final = 200
NEAREST_MAX_LINES: Final = 5_000  # a longer file is searched in its first lines only


def nearest_text(text: str, old: str) -> str:
    """Where the file comes nearest to an `old` that is not in it: the line most like it (with its number)
    and, for a one-word `old`, the word on that line most like it - or "" when nothing is near. The 1.5B
    asked to change "colour" to "color" sent old="color", read the bare "not found" as "already done"
    and said so; shown the line, a model can copy the exact text."""
    lines = text.splitlines()[:NEAREST_MAX_LINES]
    first = old.strip().splitlines()[0].strip()[:NEAREST_LINE_CHARS] if old.strip() else ""
    if not first or not lines:
        return ""
    scored = [
        (difflib.SequenceMatcher(None, first, ln.strip()).ratio(), n, ln) for n, ln in enumerate(lines, 1)
    ]
    ratio, number, line = max(scored, key=lambda item: (item[0], -item[1]))
    single = len(first.split()) == 1  # one word: say which word of the line it was meant to be
    close = difflib.get_close_matches(first, line.split(), n=1, cutoff=0.6) if single else []
    if ratio < NEAREST_MIN_RATIO and not close:
        return ""
    shown = line if len(line) <= NEAREST_LINE_CHARS else line[:NEAREST_LINE_CHARS] + " ..."
    hint = f" The nearest line is {number}: {shown!r}"
    return hint + (
        f"; it has {close[0]!r} where `old` has {first!r}." if close and close[0] != first else "."
    )


SHOWN_WHOLE_CHARS: Final = 1_500  # a file this small is shown whole in an edit's error: no read needed


def as_it_is(text: str, old: str, raw: str) -> str:
    """What an edit's error adds so that the next try can copy the exact text: a small file whole (the
    1.5B edited without reading, twice guessing the text), else the line nearest `old`."""
    if len(text) <= SHOWN_WHOLE_CHARS:
        return f" {raw} is now, whole:\n{text}" if text else f" {raw} is empty."
    return nearest_text(text, old)


def _only_occurrence(text: str, old: str, raw: str) -> int:
    """Where `old` starts in `text`; ToolError unless it occurs exactly once."""
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"edit_file: `old` was not found in {raw}; nothing was changed. Copy the exact text from the "
            "file (whitespace and line breaks matter, line numbers are not part of the text)."
            + as_it_is(text, old, raw)
        )
    if count > 1:
        raise ToolError(
            f"edit_file: `old` occurs {count} times in {raw}; include more of the surrounding "
            "lines so it occurs exactly once"
        )
    return text.index(old)
