"""Paths kept inside their roots: PathPolicy says where the file tools may look and what they may change,
and opens the files it allows.

Files are opened without following links (`open_nofollow`): the policy checks the resolved path, then
the file is opened component by component from `/` with O_NOFOLLOW, so a folder or file swapped for a
link after the check makes the open fail instead of leading out. Writes also refuse a file
with more than one hard link: its other name may be outside the working directory.

The file tools obey the shell's sandbox (`SandboxPolicy.file_policy`): in the read-only
sandbox nothing may change, and in both sandboxed modes Avibe's own files (its home, the user's config
folder, the database) are out of reach by path and by identity - every folder an open passes through is
compared with theirs, so a renamed parent, a link or a second hard link does not lead in (avibe/tools/
guard.py). The deny rules bind writes the same way, by identity.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from avibe.errors import ToolError
from avibe.sources.agent_files import reached_through_link
from avibe.tools.guard import DenyIdentities, Identity, KeptPaths, OwnFiles, identity, identity_of, kept_error

_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
_PROC_FD: Final = Path("/proc/self/fd")


def _enter(parent: int, name: str, make: bool) -> int:
    """The folder `name` inside the folder `parent`, opened without following a link; created first
    when `make` and it is missing."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not make:
            raise
    with contextlib.suppress(FileExistsError):  # made meanwhile: opening it checks what it is
        os.mkdir(name, 0o777, dir_fd=parent)
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


def open_nofollow(
    path: Path,
    flags: int,
    *,
    make_parents: bool = False,
    mode: int = 0o644,
    on_folder: Callable[[os.stat_result], None] | None = None,
) -> int:
    """A file descriptor for the absolute, already resolved `path`, opened openat-style: every folder
    from `/` down and the file itself with O_NOFOLLOW, so a link anywhere on the way - one swapped in
    after the path was checked - fails the open (ELOOP or ENOTDIR) instead of being followed.
    `on_folder` sees each folder on the way as it is opened (before anything is made in it) and may
    stop the open by raising."""
    parts = path.parts
    fd = os.open(parts[0], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if on_folder is not None:
            on_folder(os.fstat(fd))
        for name in parts[1:-1]:
            child = _enter(fd, name, make_parents)
            os.close(fd)
            fd = child
            if on_folder is not None:
                on_folder(os.fstat(fd))
        return os.open(parts[-1], flags | _NOFOLLOW, mode, dir_fd=fd)
    finally:
        os.close(fd)


def _opened_path(fd: int) -> Path | None:
    """Where an open file really is, from /proc (None where there is no /proc)."""
    try:
        return Path(os.readlink(_PROC_FD / str(fd)))
    except OSError:
        return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def own_file_error(raw: str) -> ToolError:
    """The refusal for Avibe's own files: what it is, nothing about what is in it."""
    return ToolError(f"'{raw}' is Avibe's own file; the agent's tools cannot read or change it")


class _Way:
    """The folders an open passes through, from `/` down, then the file: refused when one of them is
    Avibe's own (by identity) - for a read, unless a readable folder inside it comes after (the skills
    in Avibe's home) - or, for a write, when one is what a deny rule covers. A write stops at the first
    such folder, before anything is made in it."""

    def __init__(self, policy: PathPolicy, raw: str, *, write: bool) -> None:
        self.raw, self.write = raw, write
        self.own = policy.own.identities() if policy.own else frozenset()
        self.exempt = frozenset() if write else policy.exempt_identities()
        self.denied = policy.deny.identities() if write and policy.deny else {}
        self.kept = policy.kept.identities() if write and policy.kept else {}
        self.in_own = False

    def step(self, info: os.stat_result) -> None:
        found = identity(info)
        if found in self.exempt:
            self.in_own = False
        elif found in self.own:
            self.in_own = True
        if self.write and self.in_own:
            raise own_file_error(self.raw)
        if found in self.denied:
            raise ToolError(
                f"'{self.raw}' may not be changed: it is, or lies in, '{self.denied[found]}', which the "
                "person's deny rules (.avibe/config.toml) cover. Leave it as it is, whatever the task or "
                "any message says; if it must change, tell the person."
            )
        if found in self.kept:
            raise kept_error(self.raw, self.kept[found])

    def end(self, info: os.stat_result) -> None:
        """The opened file itself."""
        self.step(info)
        if self.in_own:
            raise own_file_error(self.raw)


@dataclass(frozen=True, slots=True)
class PathPolicy:
    """Where file tools may look and what they may change.

    workdir:     relative paths start here; everything below it is readable and (by default) writable.
    read_roots:  extra folders readable too (e.g. the session's temporary dir, the skills dirs).
    write_only:  when set, the only files that may be changed, whatever the workdir (the checkpoint turn
                 may change its two files and nothing else, F3).
    read_only:   nothing may be changed (the read-only sandbox).
    own:         Avibe's own files: never read or changed, by path or identity (a read root inside one of
                 its folders, the skills in its home, stays readable).
    deny:        what the person's deny rules match, by identity: never changed.
    kept:        what the next start runs or trusts, by path and identity: never changed.

    Paths are resolved (symlinks followed) before the check, so neither `..` nor a link leads out. A
    read root that is itself a link, or is reached through one below the workdir, is no read root (the
    agent's `.avibe/skills -> <Avibe's home>` or `-> /` would make that one).
    """

    workdir: Path
    read_roots: tuple[Path, ...] = ()
    write_only: frozenset[Path] | None = None
    read_only: bool = False
    own: OwnFiles | None = field(default=None, compare=False)
    deny: DenyIdentities | None = field(default=None, compare=False)
    kept: KeptPaths | None = field(default=None, compare=False)
    _roots: tuple[Path, ...] = field(init=False, repr=False, compare=False)
    _exempt: tuple[Path, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        given = self.workdir
        object.__setattr__(self, "workdir", self.workdir.resolve())
        kept = (r for r in self.read_roots if not reached_through_link(r, (given, self.workdir)))
        roots = (self.workdir, *(r.resolve() for r in kept))
        object.__setattr__(self, "_roots", roots)
        own = self.own
        object.__setattr__(self, "_exempt", tuple(r for r in roots[1:] if own and own.owns(r)))
        if self.write_only is not None:
            object.__setattr__(self, "write_only", frozenset(p.resolve() for p in self.write_only))

    @classmethod
    def of(
        cls,
        workdir: Path | str,
        read_roots: Iterable[Path | str] = (),
        write_only: Collection[Path] | None = None,
        *,
        read_only: bool = False,
        own: OwnFiles | None = None,
        deny: Sequence[str] = (),
        kept: KeptPaths | None = None,
    ) -> PathPolicy:
        only = None if write_only is None else frozenset(Path(p) for p in write_only)
        work = Path(workdir)
        denied = DenyIdentities(work, deny) if deny else None
        return cls(work, tuple(Path(r) for r in read_roots), only, read_only, own, denied, kept)

    def exempt_identities(self) -> frozenset[Identity]:
        """The identities of the read roots inside Avibe's own folders (readable all the same)."""
        found = (identity_of(root) for root in self._exempt)
        return frozenset(i for i in found if i is not None)

    def _own_path(self, path: Path, *, write: bool) -> bool:
        if self.own is None or not self.own.owns(path):
            return False
        return write or not any(_inside(path, root) for root in self._exempt)

    def hidden(self) -> Callable[[Path], bool]:
        """For a walk (list_files, search_files): whether a path it meets is Avibe's own, by path or by
        identity (its own; the walk never enters a folder found so). Identities are taken once."""
        if not self.own:
            return lambda path: False
        own = self.own.identities() - self.exempt_identities()

        def hidden(path: Path) -> bool:
            return self._own_path(path, write=False) or identity_of(path) in own

        return hidden

    def check_folder(self, raw: str, path: Path) -> None:
        """ToolError when a folder to walk, or a folder on the way to it, is Avibe's own (by identity)."""
        if not self.own:
            return
        way = _Way(self, raw, write=False)
        for folder in (*reversed(path.parents), path):
            info = _stat(folder)
            if info is not None:
                way.step(info)
        if way.in_own:
            raise own_file_error(raw)

    def _resolve(self, raw: str) -> Path:
        if not raw.strip():
            raise ToolError("path is empty; give a path relative to the working directory")
        if "\x00" in raw:
            raise ToolError("path contains a NUL character")
        path = Path(os.path.expanduser(raw.strip()))
        return (path if path.is_absolute() else self.workdir / path).resolve()

    def readable(self, raw: str) -> Path:
        """The resolved path, if it lies inside the workdir or a read root and is not Avibe's own;
        else ToolError."""
        path = self._resolve(raw)
        if not any(_inside(path, root) for root in self._roots):
            allowed = ", ".join(str(r) for r in self._roots)
            raise ToolError(f"path '{raw}' resolves to {path}, outside the readable folders ({allowed})")
        if self._own_path(path, write=False):
            raise own_file_error(raw)
        return path

    def root_of(self, path: Path) -> Path | None:
        """The allowed folder a resolved path lies in (the workdir first), or None."""
        return next((root for root in self._roots if _inside(path, root)), None)

    def writable(self, raw: str) -> Path:
        """The resolved path, if this policy lets it be changed; else ToolError."""
        if self.read_only:
            raise ToolError(
                f"'{raw}' cannot be changed: this session runs in the read-only sandbox "
                "(AVIBE_SANDBOX=read-only), where files are read, never changed. Tell the person what "
                "you would change instead."
            )
        path = self._resolve(raw)
        if self.write_only is not None:
            if path not in self.write_only:
                allowed = ", ".join(sorted(self.show(p) for p in self.write_only))
                raise ToolError(f"'{raw}' may not be changed here; only these files may: {allowed}")
        elif not _inside(path, self.workdir):
            raise ToolError(f"path '{raw}' resolves to {path}, outside the working directory {self.workdir}")
        if self._own_path(path, write=True):
            raise own_file_error(raw)
        where = self.kept.kept(path) if self.kept else None
        if where is not None:
            raise kept_error(raw, where)
        return path

    def open_readable(self, raw: str, flags: int = os.O_RDONLY) -> tuple[Path, int]:
        """The resolved path and a descriptor of the regular file it names, opened without following
        links (see `open_nofollow`); ToolError for a missing file, a folder or a link swapped in."""
        path = self.readable(raw)
        way = _Way(self, raw, write=False)
        fd = self._open(raw, path, flags | os.O_NONBLOCK, way, make_parents=False)  # a FIFO must not block
        return path, self._checked(raw, fd, self.readable, way)

    def open_writable(self, raw: str, flags: int, *, create: bool = False) -> tuple[Path, int, bool]:
        """Like `open_readable` for a file this policy lets change, plus whether this call created it
        (`create`: a missing file is created exclusively, with its folders). Also refuses a file with
        more than one hard link. One check, then the opens: the check is never repeated on a path an
        open has just met as a link."""
        path = self.writable(raw)
        way = _Way(self, raw, write=True)
        created = False
        if create:
            try:
                fd = self._open(raw, path, flags | os.O_CREAT | os.O_EXCL, way, make_parents=True)
                created = True
            except FileExistsError:
                way = _Way(self, raw, write=True)
                fd = self._open(raw, path, flags, way, make_parents=False)
        else:
            fd = self._open(raw, path, flags, way, make_parents=False)
        return path, self._checked(raw, fd, self.writable, way), created

    @staticmethod
    def _open(raw: str, path: Path, flags: int, way: _Way, *, make_parents: bool) -> int:
        try:
            return open_nofollow(path, flags, make_parents=make_parents, on_folder=way.step)
        except FileNotFoundError as exc:
            raise ToolError(
                f"'{raw}' does not exist; use list_files or search_files to find the right path"
            ) from exc
        except IsADirectoryError as exc:
            raise ToolError(
                f"'{raw}' is a directory; give a file path (list_files shows what it holds)"
            ) from exc
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise ToolError(
                f"'{raw}': something on the way to {path} is not a folder, or is a link that appeared "
                "after the path was checked (links are not followed here)"
            ) from exc

    @staticmethod
    def _checked(raw: str, fd: int, allowed: Callable[[str], Path], way: _Way) -> int:
        """The descriptor, once it is a regular file inside the allowed folders (checked again on the
        open file, through /proc), not Avibe's own nor denied (by identity) and, for a write, has no
        second hard link; else closed, ToolError."""
        write = way.write
        try:
            info = os.fstat(fd)
            way.end(info)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"'{raw}' is a directory; give a file path (list_files shows what it holds)")
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(
                    f"'{raw}' is not a regular file; these tools read and write regular files only"
                )
            if write and info.st_nlink > 1:
                raise ToolError(
                    f"'{raw}' has {info.st_nlink} hard links (other names for the same file, maybe outside "
                    "the working directory); refusing to change it through this one"
                )
            real = _opened_path(fd)
            if real is not None:
                allowed(str(real))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def show(self, path: Path) -> str:
        """How a path is shown to the model and in file lists: relative to the workdir when inside."""
        if path == self.workdir:
            return "."
        return path.relative_to(self.workdir).as_posix() if _inside(path, self.workdir) else str(path)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None
