"""The user's instruction files, read again each turn (F4: the system prompt is rebuilt every turn, so an
edit to AGENTS.md or a skill mid-chat is seen at the next turn) - and only when a file changed: the text
is cached under the files' modification times and sizes, so an idle turn costs a few `stat` calls and
the system prompt (the start of every request, the prompt cache's prefix) stays byte for byte the same.

API:
    Instructions = tuple[str, str, str]       (AGENTS.md, its heading, the skill catalogue)
    InstructionFiles(read, files)             read() -> Instructions; files() -> the paths it depends on
        __call__() -> Instructions            cached while every path's (mtime_ns, size) is unchanged
    skill_files(dirs) -> list[Path]           every SKILL.md below the skill folders, and the folders
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

Instructions = tuple[str, str, str]
Stamp = tuple[tuple[str, int, int], ...]


def _stamp(paths: Iterable[Path]) -> Stamp:
    """Each path with its modification time and size; a missing file is (-1, -1), so its creation counts.
    A link is stamped as itself: nothing here reaches through what the agent planted."""
    stamps = []
    for path in paths:
        try:
            info = os.stat(path, follow_symlinks=False)
            stamps.append((str(path), info.st_mtime_ns, info.st_size))
        except OSError:
            stamps.append((str(path), -1, -1))
    return tuple(stamps)


def skill_files(dirs: Sequence[Path]) -> list[Path]:
    """The skill folders themselves (a skill added or removed changes their listing) and each SKILL.md
    (a folder that is a link is stamped, never listed)."""
    found: list[Path] = []
    for folder in dirs:
        found.append(folder)
        if folder.is_symlink():
            continue
        try:
            with os.scandir(folder) as entries:
                found += sorted(Path(e.path) / "SKILL.md" for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return found


class InstructionFiles:
    """`read()` again only when one of `files()` changed since the last read (F4)."""

    def __init__(self, read: Callable[[], Instructions], files: Callable[[], Iterable[Path]]) -> None:
        self._read, self._files = read, files
        self._stamp: Stamp | None = None
        self._text: Instructions = ("", "", "")
        self.reads = 0  # how many times the files were read (not served from the cache)

    def __call__(self) -> Instructions:
        stamp = _stamp(self._files())
        if stamp != self._stamp:
            self._text, self._stamp = self._read(), stamp
            self.reads += 1
        return self._text
