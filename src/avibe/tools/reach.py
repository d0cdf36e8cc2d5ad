"""What the sandbox keeps from the agent's commands besides Avibe's own files: the host's
sockets, what the next start runs or trusts, and hard links to Avibe's files.

- Host sockets: `--ro-bind / /` does not stop `connect()` on a Unix socket, so the folders that hold the
  machine's sockets - /run (/var/run: the system bus, docker.sock, PostgreSQL's peer-auth socket
  /var/run/postgresql), $XDG_RUNTIME_DIR (the session bus, `systemd-run --user`), the ssh-agent's
  folder, a unix $DOCKER_HOST - are covered with an empty tmpfs, unless the user opts in
  (`host_sockets = "on"`).
- Kept paths: what runs at the next start of Avibe or of the user's shell - the interpreter Avibe runs
  from (its prefix, site-packages and every folder on its import path, `.pth` files included), the user
  site folder, the shell's startup files, ~/.local/bin, ~/.config/environment.d ... - and what Avibe
  trusts without checking again (the model cache) are read-only to the shell and refused by the file
  tools, also where they lie inside the writable working directory.
- Hard links: a second name of Avibe's record or token that already lies in the working directory when a
  command starts (made before, e.g. in full-access) is found by identity and covered.
"""

from __future__ import annotations

import logging
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from avibe.tools.guard import Identity, identity

log = logging.getLogger(__name__)

HOST_SOCKET_DIRS: Final = ("/run", "/var/run", "/var/run/postgresql")
# Run by a login or interactive shell, a desktop session, git or ssh: code at the user's next start.
STARTUP_FILES: Final = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".pam_environment",
    ".xprofile",
    ".xsessionrc",
    ".gitconfig",
    ".ssh",
    ".local/bin",
    ".config/environment.d",
    ".config/fish",
    ".config/systemd",
    ".config/autostart",
    ".config/git",
)
MAX_LINK_WALK: Final = 100_000  # entries looked at for hard links to Avibe's files per command


def host_socket_paths(environ: Mapping[str, str], workdir: Path, real_home: Path | None) -> tuple[Path, ...]:
    """The existing folders (or, where a folder would hide too much, sockets) that hold host sockets,
    resolved, outermost only. /tmp needs none: the sandbox has its own."""
    found = [Path(p) for p in HOST_SOCKET_DIRS]
    for name in ("XDG_RUNTIME_DIR",):
        if environ.get(name):
            found.append(Path(environ[name]))
    docker = environ.get("DOCKER_HOST", "")
    sockets = [Path(environ["SSH_AUTH_SOCK"])] if environ.get("SSH_AUTH_SOCK") else []
    if docker.startswith("unix://"):
        sockets.append(Path(docker.removeprefix("unix://")))
    work = workdir.resolve()
    home = real_home.resolve() if real_home is not None else None
    for sock in sockets:
        folder = sock.parent.resolve()
        # The socket's own folder (ssh-XXXX/) hides it and its siblings; never a folder holding the
        # working directory, the home, or / - then the socket alone.
        too_wide = work.is_relative_to(folder) or folder in (home, Path("/"))
        found.append(sock if too_wide else folder)
    paths = [p.resolve() for p in found if p.is_absolute() and os.path.lexists(p)]
    return _outermost([p for p in paths if not p.is_relative_to("/tmp")])  # the sandbox's /tmp is its own


def kept_paths(real_home: Path | None, model_cache: Path | None, workdir: Path) -> tuple[Path, ...]:
    """What the next start runs or trusts (see the module's doc), as configured (not resolved: the
    start check looks for links on the way). Import folders that hold the working directory itself
    (`python -m avibe` run in it puts it on the path) cannot be kept read-only and are left out."""
    work = workdir.resolve()
    interpreter = [sys.prefix, sys.exec_prefix, *sysconfig.get_paths().values()]
    interpreter += [entry for entry in sys.path if entry]
    interpreter += [site.getusersitepackages(), os.path.join(site.getuserbase(), "bin")]
    paths = [Path(p) for p in interpreter if os.path.isabs(p)]
    paths = [p for p in paths if not work.is_relative_to(_resolved(p))]
    if real_home is not None:
        paths += [real_home / name for name in STARTUP_FILES]
        zdotdir = os.environ.get("ZDOTDIR")
        if zdotdir and os.path.isabs(zdotdir) and not work.is_relative_to(_resolved(Path(zdotdir))):
            paths.append(Path(zdotdir))
    if model_cache is not None:
        paths.append(model_cache)
    return tuple(dict.fromkeys(paths))


def linked_own_files(own_files: Iterable[Path], workdir: Path, skip: Sequence[Path] = ()) -> list[Path]:
    """Second names, inside `workdir`, of those of Avibe's files that have more than one hard link: a
    bounded walk (links not followed, `skip` folders not entered). Nothing to walk for in the usual
    case, where every own file has a single name."""
    wanted: set[Identity] = set()
    for path in own_files:
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if info.st_nlink > 1 and not os.path.isdir(path):
            wanted.add(identity(info))
    if not wanted:
        return []
    own = {Path(p) for p in own_files}
    found: list[Path] = []
    seen = 0
    for folder, dirs, files in os.walk(workdir):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip]
        for name in files:
            path = Path(folder, name)
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if identity(info) in wanted and path not in own:
                found.append(path)
        seen += len(dirs) + len(files)
        if seen > MAX_LINK_WALK:
            log.warning(
                "hard links to Avibe's files: stopped looking after %d entries under %s", seen, workdir
            )
            break
    return found


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


def _outermost(paths: Sequence[Path]) -> tuple[Path, ...]:
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return tuple(kept)
