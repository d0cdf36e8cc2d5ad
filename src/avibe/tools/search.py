"""list_files and search_files: bounded walks over the readable folders.

Both skip version-control, virtual-env and dependency folders (SKIPPED_DIRS) and what the `.gitignore`
files of the allowed folder ignore (git's own rules, through pathspec: nested files, negations, folder
patterns; plus `.git/info/exclude`), never follow a link out of the allowed folders, and stop at a fixed
number of results (and characters) with a note saying how much was left out and how to narrow the query.
Nothing is skipped silently: both say what .gitignore left out, and search_files also says which files it
did not search and why (binary, over 2 MB, unreadable). A folder asked for by name is walked
even when .gitignore ignores it (like ripgrep given an explicit path); its own .gitignore files still
apply inside it. Avibe's own folders and files (its home, the user's config folder, the
database) are never listed, searched or walked into - found by path and by identity, so a renamed parent
or a link does not lead in - and asking for one by name is refused.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Final, NamedTuple

from pathspec import GitIgnoreSpec

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.base import SKIPPED_DIRS, BaseTool, PathPolicy, cut_text, schema

log = logging.getLogger(__name__)

MAX_LIST_ENTRIES: Final = 500
MAX_LIST_CHARS: Final = 8_000  # about 2,000 tokens: a listing must not crowd out a small window
MAX_COUNTED: Final = 100_000  # past this many left-out entries, the note says "at least"
MAX_MATCHES: Final = 200
MAX_MATCH_LINE_CHARS: Final = 300
MAX_SEARCH_FILE_BYTES: Final = 2_000_000  # larger files are data, not source: skipped by search
SKIPPED_SHOWN: Final = 5  # names shown per reason in search_files' note
MAX_IGNORE_FILE_BYTES: Final = 1_000_000  # a .gitignore larger than this is not read (nothing is skipped)
IGNORED: Final = "ignored by .gitignore"
_IGNORE_FILES: Final = (".git/info/exclude", ".gitignore")
_BINARY_PROBE: Final = 8_192


class _Found(NamedTuple):
    path: Path
    is_dir: bool
    ignored: bool  # by .gitignore; an ignored folder is reported, never walked into


@dataclass(frozen=True, slots=True)
class _Ignores:
    """The .gitignore rules in force in one folder: (folder, rules) from the outermost down. As in git,
    the deepest file with a rule for a path decides (a `!pattern` below can take back one above)."""

    chain: tuple[tuple[Path, GitIgnoreSpec], ...] = ()

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False
        for base, spec in self.chain:
            rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            include = spec.check_file(rel).include
            if include is not None:
                verdict = include
        return verdict

    def entering(self, policy: PathPolicy, folder: Path) -> _Ignores:
        """These rules plus the ones `folder` holds (.git/info/exclude first: its .gitignore wins)."""
        lines = [line for name in _IGNORE_FILES for line in _ignore_lines(policy, folder / name)]
        return _Ignores((*self.chain, (folder, _compiled(lines, folder)))) if lines else self


def _compiled(lines: list[str], folder: Path) -> GitIgnoreSpec:
    """The rules of these lines; a line git would not understand (`!`, `[z-a]`) is dropped, as git
    drops it, instead of failing the listing."""
    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        good = [line for line in lines if _valid(line)]
        log.info("ignore rules in %s: %d bad line(s) dropped", folder, len(lines) - len(good))
        return GitIgnoreSpec.from_lines(good)


def _valid(line: str) -> bool:
    try:
        GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


def _ignore_lines(policy: PathPolicy, path: Path) -> list[str]:
    """The lines of an ignore file, or none when there is no such regular file (or it is unreadable or
    huge: then nothing is skipped because of it, which keeps more rather than less)."""
    if not os.path.lexists(path):
        return []
    try:
        _, fd = policy.open_readable(str(path))
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_IGNORE_FILE_BYTES + 1)
    except (ToolError, OSError) as exc:
        log.info("ignore file %s not read: %s", path, exc)
        return []
    if len(data) > MAX_IGNORE_FILE_BYTES:
        log.info("ignore file %s not read: over %d bytes", path, MAX_IGNORE_FILE_BYTES)
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def _ignores_above(policy: PathPolicy, top: Path) -> _Ignores:
    """The rules in force in `top`'s parent: the ignore files from the allowed folder `top` lies in down
    to that parent. No rules when `top` itself is ignored: it was asked for by name."""
    root = policy.root_of(top)
    if root is None or top == root:
        return _Ignores()
    ignores = _Ignores()
    for folder in reversed(top.relative_to(root).parents):
        ignores = ignores.entering(policy, root / folder)
    return _Ignores() if ignores.ignored(top, is_dir=True) else ignores


def _walk(policy: PathPolicy, top: Path) -> Iterator[_Found]:
    """Everything below `top` in sorted order, folders of a level before its files, skipping SKIPPED_DIRS
    and links that lead out; what .gitignore ignores comes with `ignored` set (a folder not entered)."""
    rules = {top: _ignores_above(policy, top).entering(policy, top)}
    hidden = policy.hidden()
    for current, dirs, files in os.walk(top):
        base = Path(current)
        ignores = rules.pop(base)
        kept: list[str] = []
        for name in sorted(d for d in dirs if d not in SKIPPED_DIRS and _allowed(policy, base / d, hidden)):
            ignored = ignores.ignored(base / name, is_dir=True)
            yield _Found(base / name, True, ignored)
            if not ignored:
                kept.append(name)
                rules[base / name] = ignores.entering(policy, base / name)
        dirs[:] = kept
        for name in sorted(files):
            if _allowed(policy, base / name, hidden):
                yield _Found(base / name, False, ignores.ignored(base / name, is_dir=False))


def _allowed(policy: PathPolicy, path: Path, hidden: Callable[[Path], bool]) -> bool:
    """Readable under the policy (a link may lead out) and not Avibe's own."""
    try:
        policy.readable(str(path))
    except ToolError:
        return False
    return not hidden(path)


def _matches(pattern: str | None, rel: str) -> bool:
    """A glob matches a file's name or its whole relative path (`*.py`, `src/**/test_*.py`)."""
    if not pattern:
        return True
    return fnmatch(rel.rsplit("/", 1)[-1], pattern) or fnmatch(rel, pattern)


def _folder(policy: PathPolicy, raw: str) -> Path:
    top = policy.readable(raw)
    if not top.exists():
        raise ToolError(f"'{raw}' does not exist; use list_files on its parent folder to see what is there")
    policy.check_folder(raw, top)  # by identity: a renamed parent of Avibe's home is still its home
    return top


class ListFiles(BaseTool):
    """Files and folders below a folder (recursive), folders marked with a trailing slash."""

    def __init__(self, policy: PathPolicy) -> None:
        self._policy = policy
        self._spec = ToolSpec(
            name="list_files",
            description=(
                "List files below a folder (recursive; .git, .venv, node_modules and what .gitignore "
                f"ignores skipped). At most {MAX_LIST_ENTRIES} entries; folders end with /."
            ),
            parameters=schema(
                {
                    "path": ("string", "folder to list, relative to the working directory (default .)"),
                    "pattern": ("string", "only files whose name matches this glob, e.g. *.py"),
                }
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        raw = args.get("path", ".")
        top, pattern = _folder(self._policy, raw), args.get("pattern")
        if top.is_file():
            return ToolResult(output=self._policy.show(top))
        shown: list[str] = []
        ignored: list[str] = []
        chars = left = 0
        for path, is_dir, is_ignored in _walk(self._policy, top):
            rel = path.relative_to(top).as_posix()
            if not is_dir and not _matches(pattern, rel):
                continue
            entry = self._policy.show(path) + ("/" if is_dir else "")
            if is_ignored:  # an ignored folder is named even under a pattern: matches may be inside
                ignored.append(entry)
                continue
            if is_dir and pattern:
                continue
            if left or len(shown) == MAX_LIST_ENTRIES or chars + len(entry) + 1 > MAX_LIST_CHARS:
                left += 1  # counted, not shown: the note says how much is missing
                if left == MAX_COUNTED:
                    break
                continue
            shown.append(entry)
            chars += len(entry) + 1
        if left:
            more = f"at least {left}" if left == MAX_COUNTED else str(left)
            shown.append(
                f"[listing cut at {len(shown)} entries: {more} more left out; narrow it with path or pattern]"
            )
        if ignored:
            shown.append(
                f"[not listed: {_group(IGNORED, ignored)}; give an ignored folder as path to list it]"
            )
        return ToolResult(output="\n".join(shown) if shown else f"(nothing found in '{raw}')")


class SearchFiles(BaseTool):
    """Lines matching a regular expression, as `path:line: text`."""

    def __init__(self, policy: PathPolicy) -> None:
        self._policy = policy
        self._spec = ToolSpec(
            name="search_files",
            description=(
                "Search text files for a regular expression (Python syntax); shows path:line: text for "
                f"each matching line, at most {MAX_MATCHES}."
            ),
            parameters=schema(
                {
                    "pattern": ("string", "regular expression to look for, e.g. def main"),
                    "path": ("string", "folder or file to search (default .)"),
                    "glob": ("string", "only files whose name matches this glob, e.g. *.py"),
                },
                required=["pattern"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        try:
            regex = re.compile(args["pattern"])
        except re.error as exc:
            raise ToolError(f"search_files: bad regular expression {args['pattern']!r}: {exc}") from exc
        raw = args.get("path", ".")
        top = _folder(self._policy, raw)
        hits: list[str] = []
        skipped: dict[str, list[str]] = {}
        for path in self._files(top, args.get("glob"), skipped):
            if self._search(path, regex, hits, skipped):
                hits.append(f"[search cut at {MAX_MATCHES} matches; narrow it with path, glob or pattern]")
                break
        note = _skipped_note(skipped)
        if not hits:
            return ToolResult(output=f"(no line matches {args['pattern']!r} in '{raw}')" + note)
        body = cut_text("\n".join(hits), "narrow the search with path, glob or pattern")
        return ToolResult(output=body + note)

    def _files(self, top: Path, pattern: str | None, skipped: dict[str, list[str]]) -> Iterator[Path]:
        """The files to search; what .gitignore ignores goes to `skipped` instead (folders always, files
        that match `pattern`)."""
        if top.is_file():
            yield top
            return
        for path, is_dir, ignored in _walk(self._policy, top):
            if not is_dir and not _matches(pattern, path.relative_to(top).as_posix()):
                continue
            if ignored:
                skipped.setdefault(IGNORED, []).append(self._policy.show(path) + ("/" if is_dir else ""))
            elif not is_dir:
                yield path

    def _search(
        self, path: Path, regex: re.Pattern[str], hits: list[str], skipped: dict[str, list[str]]
    ) -> bool:
        """Append this file's matching lines (or why it was skipped); True once the match limit is
        reached."""
        shown = self._policy.show(path)
        data = self._read(path)
        if isinstance(data, str):
            skipped.setdefault(data, []).append(shown)
            return False
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if regex.search(line):
                if len(hits) == MAX_MATCHES:
                    return True
                hits.append(f"{shown}:{number}: {line[:MAX_MATCH_LINE_CHARS]}")
        return False

    def _read(self, path: Path) -> bytes | str:
        """The file's bytes, or why it is not searched. Opened without following links (PathPolicy)."""
        try:
            _, fd = self._policy.open_readable(str(path))
            with os.fdopen(fd, "rb") as f:
                if os.fstat(f.fileno()).st_size > MAX_SEARCH_FILE_BYTES:
                    return f"over {MAX_SEARCH_FILE_BYTES // 1_000_000} MB"
                data = f.read()
        except (ToolError, OSError) as exc:  # one unreadable file must not end the whole search
            log.info("search_files skipped %s: %s", path, exc)
            return "unreadable"
        return "binary" if b"\x00" in data[:_BINARY_PROBE] else data


def _group(reason: str, names: list[str]) -> str:
    """ "7 binary (img0.png, img1.png, img2.png, img3.png, img4.png, and 2 more)" """
    more = f", and {len(names) - SKIPPED_SHOWN} more" if len(names) > SKIPPED_SHOWN else ""
    return f"{len(names)} {reason} ({', '.join(names[:SKIPPED_SHOWN])}{more})"


def _skipped_note(skipped: dict[str, list[str]]) -> str:
    """ "[not searched: 2 binary (a.png, b.png); 1 over 2 MB (data.csv)]", or "" when none was skipped."""
    if not skipped:
        return ""
    parts = "; ".join(_group(reason, names) for reason, names in skipped.items())
    hint = "; give an ignored folder or file as path to search it" if IGNORED in skipped else ""
    return f"\n[not searched: {parts}{hint}]"
