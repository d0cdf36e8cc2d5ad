"""The bubblewrap options of a sandboxed command (avibe/tools/sandbox.py): what it sees, what it may write,
and whether it has a network.

Order matters: a bind shows its source as it is outside the sandbox, so a bind made after a cover over a
folder that holds it would uncover it, and a writable bind made after a read-only one inside it would
open it again. So: the covers that hold the working directory, the working directory, the folders pinned
on the way to what is protected, the home's read-only top level, the read-only binds, then the covers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from avibe.tools.approval import stated_patterns
from avibe.tools.guard import protected_paths
from avibe.tools.layout import in_home_top
from avibe.tools.reach import host_socket_paths, linked_own_files

if TYPE_CHECKING:
    from avibe.tools.sandbox import SandboxPolicy

SANDBOX_HOME: Final = "/tmp/home"
MAX_HOME_ENTRIES: Final = 512  # the home's own folders made writable one by one (beyond: read-only)
# Process isolation shared by every sandboxed launch (and the probe).
ISOLATION: Final = (
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--new-session",
    "--cap-drop",
    "ALL",
)


def bwrap_args(policy: SandboxPolicy) -> list[str]:
    """bwrap and its options, up to the command."""
    work = policy.workdir
    args = [shutil.which("bwrap") or "bwrap", *ISOLATION, *(() if policy.network else ("--unshare-net",))]
    args += [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--dir",
        SANDBOX_HOME,
    ]
    sockets = () if policy.host_sockets else host_socket_paths(os.environ, work, policy.real_home)
    covers = [*(h for h in policy.hidden if h != work), *(s for s in sockets if s != work)]
    # A covered directory that holds the workdir is covered first, then the workdir bound over it;
    # everything else covered last, so a database inside the workdir is covered too. (The workdir itself
    # cannot be hidden from its commands: a home used as the workdir stays visible, and the database
    # files in it are covered one by one.)
    around = [h for h in covers if work.is_relative_to(h)]
    inside = [h for h in covers if h not in around and not covered(h, covers, work)]
    writable = policy.mode == "workspace-write"
    # (A covering tmpfs is made read-only only after the workdir's mount point was made in it.)
    args += _cover(around, remount=False)
    args += ["--bind" if writable else "--ro-bind", str(work), str(work)]
    args += [arg for h in around if h.is_dir() for arg in ("--remount-ro", str(h))]
    # Second names of Avibe's files already in the workdir (finding 16): covered like the files.
    own = [*(h for h in policy.hidden if not h.is_dir()), *_files_directly_in(policy.folders)]
    links = linked_own_files(own, work, skip=[h for h in covers if h.is_dir()])
    if writable:  # (read-only: nothing can be renamed or changed anyway)
        args += _writable(policy, covers, inside, links)
    args += _cover(inside, keep=_resolver_files(inside) if policy.network else ())
    args += [a for link in links for a in ("--ro-bind", "/dev/null", str(link))]
    args += ["--chdir", str(work)]
    return args


def _writable(policy: SandboxPolicy, covers: list[Path], inside: list[Path], links: list[Path]) -> list[str]:
    """The workspace-write binds: pins (also on the way to `links`, the hard links to Avibe's files,
    covered last), the home's read-only top level, the read-only paths."""
    work, home = policy.workdir, _guarded_home(policy)
    denied = protected_paths(work, (*policy.protected, *stated_patterns(policy.stated())))
    # Deny matches inside a covered folder are out of sight already: not bound into the cover.
    protected = [Path(p) for p in denied if not covered(Path(p), covers, work)]
    kept = [k for k in policy.kept if _inside(k, work) and k.exists() and not covered(k, covers, work)]
    targets = [*(h for h in inside if h.exists()), *protected, *kept, *links]
    pins = pinned(work, [*targets, *([home] if home else [])], covers)
    # A pin in the home's read-only part is needed no more (nothing there can be renamed), and a
    # writable one there would open it again.
    ro_home = [p for p in pins if home is not None and in_home_top(p, home, work)]
    outer = [p for p in pins if p not in ro_home and not (home and p.is_relative_to(home))]
    inner = [p for p in pins if p not in ro_home and p not in outer]
    args = [a for pin in outer for a in ("--bind", str(pin), str(pin))]
    if home is not None:
        args += ["--ro-bind", str(home), str(home)]
        args += [a for entry in _home_entries(home, covers) for a in ("--bind", str(entry), str(entry))]
    args += [a for pin in inner for a in ("--bind", str(pin), str(pin))]
    args += [a for path in (*protected, *kept) for a in ("--ro-bind", str(path), str(path))]
    return args


def _guarded_home(policy: SandboxPolicy) -> Path | None:
    """The user's real home when the writable workdir holds it: its top level and dot folders are then
    read-only (no startup file - ~/.bashrc, ~/.zshenv, one that does not exist yet - can be written),
    its other folders stay writable."""
    home = policy.real_home
    if home is None or not home.is_dir() or not _inside(home, policy.workdir):
        return None
    return home


def _home_entries(home: Path, covers: Sequence[Path]) -> list[Path]:
    """The home's own folders and files that stay writable: not dot ones, not links, not covered."""
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return []
    entries = [home / n for n in names if not n.startswith(".")]
    kept = [e for e in entries if not e.is_symlink() and not any(e.is_relative_to(c) for c in covers)]
    return kept[:MAX_HOME_ENTRIES]


def covered(path: Path, covers: Sequence[Path], work: Path) -> bool:
    """True when another covered directory already covers `path` (and the workdir, bound over that
    directory, does not bring it back)."""
    back = path.is_relative_to(work)
    return any(
        h not in (path, work)
        and h.is_dir()
        and path.is_relative_to(h)
        and not (back and work.is_relative_to(h))
        for h in covers
    )


def pinned(work: Path, targets: Sequence[Path], covers: Sequence[Path]) -> list[Path]:
    """The existing folders strictly between the working directory and each target inside it, outermost
    first: bound onto themselves they are mount points, which no command can rename or remove (EBUSY),
    so a covered or read-only path stays where it is."""
    found: set[Path] = set()
    for target in targets:
        if target != work and target.is_relative_to(work):
            rel = target.relative_to(work)
            found.update(work / parent for parent in list(rel.parents)[:-1])
    pins = [p for p in found if p.is_dir() and not p.is_symlink() and not covered(p, covers, work)]
    return sorted(pins, key=lambda p: (len(p.parts), p))


def _cover(paths: Sequence[Path], *, remount: bool = True, keep: Sequence[Path] = ()) -> list[str]:
    """bwrap options that cover each existing path: an empty tmpfs over a directory, /dev/null over
    anything else. Paths that do not exist yet are left alone: a sandbox cannot create them under the
    read-only root, and one created in a writable workdir is not Avibe's (the open database exists).
    `keep`: files brought back read-only into a covered folder (the resolver's configuration)."""
    args: list[str] = []
    for path in paths:
        if path.is_dir():  # read-only too: nothing written there could pass for Avibe's
            back = [a for f in keep if f.is_relative_to(path) for a in ("--ro-bind", str(f), str(f))]
            args += ["--tmpfs", str(path), *back, *(("--remount-ro", str(path)) if remount else ())]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _resolver_files(covers: Sequence[Path]) -> list[Path]:
    """With the network on: /etc/resolv.conf's target when it lies in a covered socket folder (systemd's
    /run/systemd/resolve/stub-resolv.conf), so names still resolve."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    hit = target.is_file() and any(target.is_relative_to(c) for c in covers)
    return [target] if hit else []


def _files_directly_in(folders: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                found += [Path(e.path) for e in entries if not e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
    return found


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)
