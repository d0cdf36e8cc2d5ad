"""edit_file: replace one exact occurrence of a string, and show a short diff of the result.

When `old` is not in the file, or occurs more than once, nothing is changed and the error shows what the
file holds (a small file whole, else the line nearest `old`), so the next try can copy the exact text.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import BaseTool, PathPolicy, schema
from avibe.tools.files.preview import approved, edit_preview, same_path
from avibe.tools.files.text import ReadLedger, decode, diff, digest_of
from avibe.tools.files.write import WriteFile
from avibe.tools.undo import Snapshots


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
                text = decode(f.read(SHOWN_WHOLE_CHARS * 8 + 1), raw)
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
        checked = approved(self._approval, self._policy, "edit_file", raw, edit_preview(old, new))
        path, fd, _ = self._policy.open_writable(raw, os.O_RDWR)
        with os.fdopen(fd, "r+b") as f:
            same_path(checked, path, raw)
            before = f.read()
            text = decode(before, raw)
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
        if self._ledger.seen(path, digest_of(before)) == "fresh":
            self._ledger.note(path, digest_of(after.encode("utf-8")))
        shown = self._policy.show(path)
        first = text.count("\n", 0, start) + 1
        last = first + new.count("\n")
        said = f"edited {shown}: replaced 1 occurrence (now lines {first}-{last})\n"
        said += diff(text, after, shown)
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
