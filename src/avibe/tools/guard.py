"""What no tool of the agent may touch, by path and by identity: Avibe's own files, and the paths
the person's deny rules cover.

A path names a file only until something on the way is renamed, linked or swapped: `mv .local x` carries
Avibe's home away from the path a check looks at, and `mv lib lib2` carries `lib/vendor` out of the deny
rule `lib/vendor/**`. So the tools also compare identities, `(st_dev, st_ino)`: of Avibe's folders and
files (taken when the policy is made and again at each check, so one that appears later is found too),
and of what the deny rules match (again at each check). A file is refused when it, or any folder on the
way to it, has such an identity - whatever it is called now, and whatever link or second name led there.
The shell's sandbox adds the other half: there, a folder on the way to a covered or read-only path is a
mount point, which cannot be renamed at all (avibe/tools/sandbox.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from avibe.errors import ToolError
from avibe.tools.approval import compile_path_rule

log = logging.getLogger(__name__)

Identity = tuple[int, int]  # (st_dev, st_ino)
MAX_PROTECTED_WALK: Final = 200_000  # entries looked at for deny matches per command (a guard on huge trees)


def identity(info: os.stat_result) -> Identity:
    return info.st_dev, info.st_ino


def identity_of(path: Path | str) -> Identity | None:
    """The identity of `path` itself (a link is not followed), or None when it does not exist."""
    try:
        return identity(os.stat(path, follow_symlinks=False))
    except OSError:
        return None


class OwnFiles:
    """Avibe's own folders and files (its home, the user's config folder, the SQLite database and its
    companions ...), resolved when made. `owns` answers by path; `identities` by identity: the folders and
    files themselves and every non-folder directly inside one of the folders (a second hard link to
    `serve-token` or to the database is Avibe's file too). Identities seen once are kept: a folder renamed
    since is still known."""

    def __init__(self, paths: Iterable[Path] = ()) -> None:
        self.paths = tuple(dict.fromkeys(p.expanduser().resolve() for p in paths))
        self._seen: set[Identity] = set()
        self.identities()

    def __bool__(self) -> bool:
        return bool(self.paths)

    def owns(self, path: Path) -> bool:
        """Whether the resolved `path` is one of them or lies inside one."""
        return any(path == own or path.is_relative_to(own) for own in self.paths)

    def identities(self) -> frozenset[Identity]:
        """The identities known so far plus those on disk now (a path that did not exist before may)."""
        for path in self.paths:
            found = identity_of(path)
            if found is None:
                continue
            self._seen.add(found)
            if path.is_dir():
                self._seen.update(_files_in(path))
        return frozenset(self._seen)


def _files_in(folder: Path) -> set[Identity]:
    """The identities of what lies directly in `folder`, folders left out (they cannot be hard-linked)."""
    found: set[Identity] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        found.add(identity(entry.stat(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError as exc:
        log.info("own folder %s not listed: %s", folder, exc)
    return found


class DenyIdentities:
    """The identities of what the person's deny rules match under `workdir`: those found when made, plus
    those found at each `identities()` call (each write), each with the path that matched (for the
    message). Kept once seen, so a denied folder renamed since is still denied."""

    def __init__(self, workdir: Path, patterns: Sequence[str]) -> None:
        self.workdir = workdir.resolve()
        self.patterns = tuple(dict.fromkeys(patterns))
        self._seen: dict[Identity, str] = {}
        self.identities()

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def identities(self) -> dict[Identity, str]:
        for path in protected_paths(self.workdir, self.patterns):
            found = identity_of(path)
            if found is not None:
                self._seen[found] = Path(path).relative_to(self.workdir).as_posix()
        return dict(self._seen)


def protected_paths(workdir: Path, patterns: Sequence[str]) -> list[str]:
    """The existing paths under `workdir` that a deny pattern matches, outermost only (a folder whose
    whole content is denied - `vendor/**` - is bound itself, so nothing new appears in it either). Links
    are not followed; .git is not looked into."""
    if not patterns:
        return []
    rules = [compile_path_rule(p) for p in patterns]
    found: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(workdir):
        rel = os.path.relpath(folder, workdir)
        base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        kept = []
        for name in sorted(dirs):
            if name == ".git":
                continue
            if any(r.fullmatch(base + name) or r.fullmatch(base + name + "/") for r in rules):
                found.append(os.path.join(folder, name))
            else:
                kept.append(name)
        dirs[:] = kept
        found += [os.path.join(folder, n) for n in sorted(files) if any(r.fullmatch(base + n) for r in rules)]
        seen += len(dirs) + len(files)
        if seen > MAX_PROTECTED_WALK:
            log.warning("deny rules: stopped looking after %d entries under %s", seen, workdir)
            break
    return found


def kept_error(raw: str, where: str) -> ToolError:
    """The refusal for what the next start runs or trusts (avibe/tools/reach.py)."""
    return ToolError(
        f"'{raw}' may not be changed: it is, or lies in, {where}, which the person's next start runs or "
        "trusts (Avibe's interpreter, a shell startup file, the model cache, a trusted project's config). "
        "Leave it as it is; if it must change, tell the person."
    )


class KeptPaths:
    """What the agent's tools must not change because the next start runs or trusts it (avibe/tools/
    reach.py: Avibe's interpreter, the shell's startup files, the model cache, a trusted project's
    config), by path - `kept(path)`, for what does not exist yet - and by identity: the paths themselves
    when they exist, each with the path it stands for (the message), kept once seen like the deny
    rules'. `home`: the user's home when the workdir holds it - its top level and dot folders are
    kept whole, as the shell's sandbox keeps them read-only (avibe/tools/mounts.py)."""

    def __init__(self, paths: Iterable[Path], home: Path | None = None) -> None:
        self.paths = tuple(dict.fromkeys(p.expanduser().resolve() for p in paths))
        self.home = home.expanduser().resolve() if home is not None else None
        self._seen: dict[Identity, str] = {}
        self.identities()

    def __bool__(self) -> bool:
        return bool(self.paths) or self.home is not None

    def kept(self, path: Path) -> str | None:
        """The kept path that the resolved `path` is or lies in (as shown in a message), or None."""
        for kept in self.paths:
            if path == kept or path.is_relative_to(kept):
                return str(kept)
        home = self.home
        if home is not None and path != home and path.is_relative_to(home):
            parts = path.relative_to(home).parts
            if parts[0].startswith("."):
                return str(home / parts[0])
            if len(parts) == 1 and not os.path.lexists(path):  # a new entry: the top level is read-only
                return f"{home} (its top level)"
        return None

    def identities(self) -> dict[Identity, str]:
        paths = list(self.paths)
        if self.home is not None:
            paths += _dot_entries(self.home)
        for path in paths:
            found = identity_of(path)
            if found is not None:
                self._seen[found] = str(path)
        return dict(self._seen)


def _dot_entries(home: Path) -> list[Path]:
    try:
        return [home / name for name in os.listdir(home) if name.startswith(".")]
    except OSError:
        return []
