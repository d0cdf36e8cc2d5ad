"""One way Avibe's own process reads a file from a place the agent can write (the workdir): AGENTS.md,
skills and the files beside them, the project's `.avibe/config.toml`, watched files, the provenance walk.

Avibe reads these outside the sandbox, with the user's authority, so nothing the agent planted may lead
it elsewhere: `read_agent_file(root, relative)` never follows a link on any component below `root`
(openat2 with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH where the kernel has it, else a walk that opens each
folder with O_NOFOLLOW | O_DIRECTORY from the one before), opens only a regular file (O_NONBLOCK: a FIFO
cannot hang the read), caps the size, refuses Avibe's own files by identity (a hard link to the serve
token is still the token) and decodes UTF-8 with a one-line error for anything else. The result says
what happened; `line()` is the one line for the person, `note()` the one line for the model - never a
traceback, never the content of what a link pointed at.

API:
    read_agent_file(root, relative, *, max_bytes, own=(), text=True) -> AgentFile
    read_agent_file_or_alias(root, relative, ...) -> AgentFile  one link hop to a file beside it, as above
    alias_below(root, relative) -> str | None               where such a link points, below root
    list_agent_dir(root, relative) -> list[str] | None     names in a folder reached with no link
    link_below(root, path) -> bool                          a link on the way from root down to path
    reached_through_link(path, below) -> bool               path is a link, or behind one below a root
    AgentFile: status ("read", "link", "not_regular", "too_big", "binary", "own", "missing", "error"),
               path, data, text, size, detail; .ok, .digest, .why(), .line(), .note()
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import os
import platform
import stat
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Literal

Identity = tuple[int, int]  # (st_dev, st_ino), as avibe.tools.guard
Status = Literal["read", "link", "not_regular", "too_big", "binary", "own", "missing", "error"]

DEFAULT_MAX_BYTES: Final = 256 * 1024  # AGENTS.md, a SKILL.md: instructions, never a data file
_SYS_OPENAT2: Final = 437  # the same number on every architecture with the unified syscall table
_OPENAT2_MACHINES: Final = frozenset(
    {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "ppc64", "s390x", "loongarch64"}
)
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_WHY: Final[dict[str, str]] = {
    "link": "it is a link, or lies behind one (Avibe never follows links where the agent can write)",
    "not_regular": "it is not a regular file",
    "binary": "it is not UTF-8 text",
    "own": "it is one of Avibe's own files",
    "missing": "it does not exist",
}


@dataclass(frozen=True, slots=True)
class AgentFile:
    """What one read found: the status, and the bytes and text when it was read."""

    path: Path
    status: Status
    data: bytes = b""
    text: str = ""
    size: int = 0  # the file's size, when it was opened
    detail: str = ""  # too_big: the cap; error: the OS's reason

    @property
    def ok(self) -> bool:
        return self.status == "read"

    @property
    def digest(self) -> str | None:
        """The sha256 of the bytes read (None when nothing was)."""
        return hashlib.sha256(self.data).hexdigest() if self.ok else None

    def why(self) -> str:
        if self.status == "too_big":
            return f"it is {self.size:,} bytes, more than the {self.detail} bytes Avibe reads from it"
        if self.status == "error":
            return f"it cannot be read ({self.detail})"
        return _WHY.get(self.status, self.status)

    def line(self) -> str:
        """The one line for the person."""
        return f"{self.path} was not read: {self.why()}"

    def note(self) -> str:
        """The one line for the model: that it was not read, and why - nothing from it."""
        return f"Not read: {self.why()}."


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """libc for the openat2 system call, probed once; None where the kernel or a seccomp filter lacks it."""
    if platform.system() != "Linux" or platform.machine().lower() not in _OPENAT2_MACHINES:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
    except (OSError, AttributeError):
        return None
    probe = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _syscall_openat2(libc, probe, ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.close(probe)
    if fd < 0:
        return None  # ENOSYS (an old kernel), EPERM (a container's filter): the walk does the same
    os.close(fd)
    return libc


def _syscall_openat2(libc: ctypes.CDLL, dir_fd: int, relative: str, flags: int) -> int:
    how = _OpenHow(flags, 0, _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    result = libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(relative)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    return int(result) if result >= 0 else -ctypes.get_errno()


def _parts(relative: str | Path) -> list[str]:
    """The components of a relative path; '..' and absolute paths are refused (nothing leads above)."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{relative!s} must be a path below its root, without '..'")
    return [part for part in path.parts if part != "."]


def _walk_open(dir_fd: int, parts: list[str], flags: int) -> int:
    """openat2's promise without openat2: each folder opened from the one before with O_NOFOLLOW."""
    fd = os.dup(dir_fd)
    try:
        for name in parts[:-1]:
            child = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def _open_beneath(root: Path, relative: str | Path, flags: int) -> int:
    """A descriptor for `relative` below `root`, no link followed below `root`; OSError (ELOOP for a link,
    ENOENT, ENOTDIR, ...) otherwise. `root` itself is opened as given: it is the caller's, not the agent's."""
    parts = _parts(relative)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not parts:
            return os.dup(root_fd)
        libc = _libc()
        if libc is None:
            return _walk_open(root_fd, parts, flags)
        fd = _syscall_openat2(libc, root_fd, "/".join(parts), flags)
        if fd < 0:
            raise OSError(-fd, os.strerror(-fd), str(root / relative))
        return fd
    finally:
        os.close(root_fd)


def _link_met(root: Path, relative: str | Path) -> bool:
    """Whether a component below `root` on the way to `relative` is a link (after an open failed)."""
    current = root
    for name in _parts(relative):
        current = current / name
        try:
            info = os.lstat(current)
        except OSError:
            return False
        if stat.S_ISLNK(info.st_mode):
            return True
        if not stat.S_ISDIR(info.st_mode):
            return False
    return False


def _failed(path: Path, root: Path, relative: str | Path, exc: OSError) -> AgentFile:
    if exc.errno in (errno.ELOOP, errno.EXDEV) or _link_met(root, relative):
        return AgentFile(path, "link")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return AgentFile(path, "missing")
    if exc.errno == errno.ENXIO:  # a socket
        return AgentFile(path, "not_regular")
    return AgentFile(path, "error", detail=exc.strerror or str(exc))


def read_agent_file(
    root: Path,
    relative: str | Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    own: Collection[Identity] = (),
    text: bool = True,
) -> AgentFile:
    """`root / relative` read as described in the module docstring. `own`: the identities of Avibe's own
    files (`OwnFiles.identities()`); `text`: decode as UTF-8 ("binary" when it is not, or holds NUL)."""
    path = root / relative
    try:
        fd = _open_beneath(root, relative, _FILE)
    except OSError as exc:
        return _failed(path, root, relative, exc)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return AgentFile(path, "not_regular")
        if (info.st_dev, info.st_ino) in own:
            return AgentFile(path, "own")
        if info.st_size > max_bytes:
            return AgentFile(path, "too_big", size=info.st_size, detail=f"{max_bytes:,}")
        data = _read_up_to(fd, max_bytes + 1)
    except OSError as exc:
        return AgentFile(path, "error", detail=exc.strerror or str(exc))
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while it was read
        return AgentFile(path, "too_big", size=len(data), detail=f"{max_bytes:,}")
    if not text:
        return AgentFile(path, "read", data, size=len(data))
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        return AgentFile(path, "binary", size=len(data))
    if "\x00" in decoded:
        return AgentFile(path, "binary", size=len(data))
    return AgentFile(path, "read", data, decoded, len(data))


def read_agent_file_or_alias(
    root: Path,
    relative: str | Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    own: Collection[Identity] = (),
) -> AgentFile:
    """As `read_agent_file`, but where `relative` itself is a link whose target, taken as written, lies
    below `root` (`AGENTS.md -> CLAUDE.md`, a common alias), that target is read the same way - one hop,
    no link on its way, never inside a folder of Avibe's own (its identity is in `own`). The target is a
    file the agent could write directly anyway, so reading it gives the agent nothing new; a target
    outside `root`, in Avibe's home or behind a further link stays "link", its content never read."""
    found = read_agent_file(root, relative, max_bytes=max_bytes, own=own)
    if found.status != "link":
        return found
    alias = alias_below(root, relative)
    if alias is None or _through_own_folder(root, alias, own):
        return found
    target = read_agent_file(root, alias, max_bytes=max_bytes, own=own)
    return AgentFile(found.path, "link") if target.status == "link" else target


def alias_below(root: Path, relative: str | Path) -> str | None:
    """The target of the link `root / relative`, relative to `root`, when it is a file in the same folder
    as written (normalised without resolving anything); None otherwise, or when `relative` is no link."""
    try:
        parts = _parts(relative)
        if not parts or (len(parts) > 1 and _link_met(root, PurePosixPath(*parts[:-1]))):
            return None  # a link on the way to the link itself: not an alias beside it
        target = os.readlink(root / relative)
    except (OSError, ValueError):
        return None
    base = Path(os.path.abspath(root))
    folder = base.joinpath(*parts[:-1])
    joined = Path(os.path.normpath(folder / target))
    if joined.parent != folder:  # beside the link only: never a hidden folder's file (Avibe's, say)
        return None
    return joined.relative_to(base).as_posix()


def _through_own_folder(root: Path, relative: str, own: Collection[Identity]) -> bool:
    """Whether a folder on the way from `root` to `relative` is one of Avibe's own (its home lying in the
    workdir, say): what lies below it is Avibe's, whatever its own identity."""
    current = root
    for name in _parts(relative)[:-1]:
        current = current / name
        try:
            info = os.lstat(current)
        except OSError:
            return True
        if (info.st_dev, info.st_ino) in own:
            return True
    return False


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def list_agent_dir(root: Path, relative: str | Path) -> list[str] | None:
    """The names in the folder `root / relative`, reached with no link below `root` (sorted); None when
    it is missing, not a folder, or a link is on the way."""
    try:
        fd = _open_beneath(root, relative, _DIR)
    except (OSError, ValueError):
        return None
    try:
        return sorted(os.listdir(fd))
    except OSError:
        return None
    finally:
        os.close(fd)


def link_below(root: Path, path: Path) -> bool:
    """Whether `path` itself, or a folder between `root` and it, is a link (compared as written, not
    resolved); False for a path not below `root`."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    return _link_met(root, relative) if relative.parts else False


def reached_through_link(path: Path, below: Iterable[Path] = ()) -> bool:
    """Whether `path` (as given, made absolute) is a link, or lies below one of the folders `below`
    through a link - a read root the agent could have planted (`.avibe/skills -> /`)."""
    absolute = Path(os.path.abspath(path))
    if absolute.is_symlink():
        return True
    return any(link_below(root, absolute) for root in below)
