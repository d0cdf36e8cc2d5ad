"""The approval of a change, before anything is opened for writing: the person's deny rules are checked,
and in ask mode the person sees the change first - a diff, or a new file's lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from avibe.errors import ToolError
from avibe.sources.agent_files import read_agent_file
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import PathPolicy
from avibe.tools.files.text import diff, line_count, lines_said

MAX_PREVIEW_BYTES: Final = 2_000_000  # a larger file is not read to show a diff before approval

Preview = Callable[[Path, str], tuple[str, str]]  # (resolved path, shown path) -> (detail, diff)


def approved(
    approval: ApprovalPolicy | None, policy: PathPolicy, tool: str, raw: str, preview: Preview
) -> Path | None:
    """The resolved path once the approval policy lets `tool` change it (None without a policy);
    ToolError naming the rule, or the person's refusal, otherwise. In ask mode the person sees the
    change first: a diff, or a new file's lines (`preview`, run only when someone will be asked)."""
    if approval is None:
        return None
    path = policy.writable(raw)
    shown = policy.show(path)
    detail, shown_diff = preview(path, shown) if approval.mode == "ask" else ("", "")
    approval.check_write(tool, shown, detail, shown_diff)
    return path


def same_path(checked: Path | None, opened: Path, raw: str) -> None:
    """The path opened is the one approved (a link swapped in between would resolve elsewhere)."""
    if checked is not None and checked != opened:
        raise ToolError(f"'{raw}' changed while it was checked (now {opened}); try again")


def _current_text(path: Path) -> str | None:
    """The file's text as it is now, for a preview; None when there is none to show (missing, too large,
    binary, not UTF-8, or a link swapped in since the path was checked: read the one safe way)."""
    found = read_agent_file(path.parent, path.name, max_bytes=MAX_PREVIEW_BYTES)
    return found.text if found.ok else None


def _added(content: str, shown: str) -> str:
    """A new file's (or an append's) lines as a diff of additions, cut like `diff`."""
    return diff("", content, shown)


def write_preview(content: str, mode: str) -> Preview:
    def preview(path: Path, shown: str) -> tuple[str, str]:
        lines = lines_said(line_count(content))
        if not path.exists():
            return f"new file, {lines}", _added(content, shown)
        if mode == "append":
            return f"append {lines}", _added(content, shown)
        before = _current_text(path)
        if before is None:
            return f"overwrite with {lines}; no diff (a binary or large file)", ""
        return f"overwrite: {lines_said(line_count(before))} become {lines}", diff(before, content, shown)

    return preview


def edit_preview(old: str, new: str) -> Preview:
    def preview(path: Path, shown: str) -> tuple[str, str]:
        before = _current_text(path)
        if before is None or before.count(old) != 1:
            return f"replace {len(old)} chars", ""  # the edit itself says what is wrong
        return "edit", diff(before, before.replace(old, new, 1), shown)

    return preview
