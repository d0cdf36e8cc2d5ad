"""The start check of the sandbox: before anything is written, refuse a layout in which the
sandbox could not keep out of the agent's reach what must stay out of it - Avibe's own files, and what
the next start runs or trusts (its interpreter, the shell's startup files, the model cache: the kept
paths of avibe/tools/reach.py). One line says what to change.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from avibe.errors import ConfigError

MODES: Final = ("read-only", "workspace-write", "full-access")


class UnsafeLayout(ConfigError):
    """The sandbox cannot keep Avibe's own files out of the agent's reach with this working directory;
    the message says what to move or choose."""


def sqlite_path(database_url: str) -> Path | None:
    """The file of a SQLite URL, as the store reads it (None for other backends and in-memory ones)."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return None
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in {"", ":memory:"} or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def check_layout(
    mode: str,
    workdir: Path,
    *,
    home: Path,
    config_dir: Path | None,
    database_url: str,
    kept: Sequence[Path] = (),
    real_home: Path | None = None,
) -> None:
    """The start check: raise UnsafeLayout when, in a sandboxed mode, the agent's writable
    folder would hold what must stay read-only to it - the working directory is Avibe's home or the
    user's config folder, or lies inside one; or, in workspace-write, the SQLite database lies directly
    in the working directory (a command could put `-journal` / `-wal` files next to it that SQLite reads
    as its own), or one of them - or a kept path (`kept`: what the next start runs or trusts) - is reached
    through a link inside it (a command could replace the link). A home, config folder or database in a
    subfolder of the working directory is fine: it is covered, cannot be renamed, and the file tools know
    it by identity. full-access: no check (the person opted out of the sandbox)."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; the modes are {', '.join(MODES)}")
    if mode == "full-access":
        return
    work = workdir.expanduser().resolve()
    named = [
        (home, "Avibe's home", "work in another folder, or move Avibe's home (AVIBE_HOME)"),
        (config_dir, "Avibe's user config folder", "work in another folder"),
    ]
    for folder, what, fix in named:
        if folder is not None and work.is_relative_to(folder.expanduser().resolve()):
            raise UnsafeLayout(
                f"the working directory {work} is {what} or lies inside it, so the agent could change "
                f"Avibe's own files; {fix}"
            )
    database = sqlite_path(database_url)
    if mode != "workspace-write":
        return
    if database is not None and database.resolve().parent == work:
        raise UnsafeLayout(
            f"the record's database {database.name} lies directly in the working directory {work}, where "
            "the agent could put files next to it that SQLite would read as part of the record; move the "
            "database into a folder of its own (AVIBE_DATABASE_URL), or use AVIBE_SANDBOX=read-only"
        )
    for path in (home, config_dir, database):
        link = None if path is None else _replaceable_link(path, work, real_home)
        if link is not None:
            raise UnsafeLayout(
                f"Avibe reaches {path} through the link {link} in the working directory, which the agent "
                "could replace with a folder or file of its own; point the setting (AVIBE_HOME, "
                "AVIBE_DATABASE_URL, XDG_CONFIG_HOME) at the real path, or use AVIBE_SANDBOX=read-only"
            )
    # A link inside a kept folder (a venv's `lib64 -> lib`) is read-only with it: not replaceable.
    fixed = [_real(path) for path in kept]
    for path in kept:
        link = _replaceable_link(path, work, real_home, fixed)
        if link is not None:
            raise UnsafeLayout(
                f"{path} (run or trusted at the next start) is reached through the link {link} in the "
                "working directory, which the agent could replace with one of its own; replace the link "
                "with the real folder or file, work in another folder, or use AVIBE_SANDBOX=read-only"
            )


def _real(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


def _replaceable_link(
    path: Path, work: Path, real_home: Path | None = None, fixed: Sequence[Path] = ()
) -> Path | None:
    """The first link on the way to `path` (as configured, not resolved) whose own entry lies inside
    `work`: a command can remove it and put something else there, and Avibe would follow that next time.
    An entry in the read-only part of a home inside `work` (its top level and dot folders,
    avibe/tools/mounts.py), or inside a `fixed` folder (bound read-only), cannot be replaced."""
    current = Path("/")
    for part in Path(os.path.abspath(path.expanduser())).parts[1:]:
        current = current / part
        if not current.is_symlink():
            continue
        parent = current.parent.resolve()
        if not parent.is_relative_to(work) or in_home_top(parent / current.name, real_home, work):
            continue
        if not any(parent.is_relative_to(folder) for folder in fixed):
            return current
    return None


def in_home_top(path: Path, real_home: Path | None, work: Path) -> bool:
    """Whether `path` (its folder resolved) lies in the part of the user's home that the sandbox keeps
    read-only when the working directory holds the home: directly in it, or in one of its dot folders."""
    if real_home is None:
        return False
    home = real_home.expanduser().resolve()
    if not home.is_relative_to(work) or path == home or not path.is_relative_to(home):
        return False
    parts = path.relative_to(home).parts
    return len(parts) == 1 or parts[0].startswith(".")
