"""The shell tool's sandbox: what a command the model runs can see, write and keep running.

Nobody but the person writes the person's words (DESIGN "the agent's tools never reach Avibe's
own home or database"): a model that can open the record could insert a `kind='user'` row that the next
view shows as the user's and the next memo copies (SPEC N1, T1). So every command runs in bubblewrap
(`bwrap`), as Claude Code does on Linux, in one of three modes, as Codex names them:

- `read-only`: the whole filesystem read-only, the working directory too; only a private /tmp is writable.
- `workspace-write` (default): as read-only, but the working directory is writable.
- `full-access` (explicit opt-in): no bubblewrap; the command sees and may write what Avibe may.

In every mode the environment is rebuilt from an allow-list (no provider keys, no `AVIBE_*`, no database
URL: the checkpoint and the shell never need them) and the command runs in its own process group. In the
two sandboxed modes, additionally:
- Avibe's own files are covered (an empty read-only tmpfs over a directory, /dev/null over a file): its
  home, the user's config folder (a database URL there may hold a password), the database file and its
  companions, and the database's whole folder when that lies inside the working directory (so no
  `-journal` can be put next to it). A folder of these that lies in the writable working directory but
  does not exist yet is made (empty) first, so that nothing a command writes can take its place,
- every folder between the working directory and a covered path inside it, or a path the deny rules
  protect, is bound onto itself: a mount point cannot be renamed or removed (EBUSY), so `mv .local x`
  cannot carry Avibe's home away from where Avibe looks for it, nor `mv lib lib2` take `lib/vendor` out
  of the deny rule `lib/vendor/**`,
- /tmp is private and HOME points into it, so a command cannot read or leave files elsewhere in /tmp,
- all capabilities are dropped (as root, bwrap would otherwise keep them and could remount / writable),
- a new PID namespace: when the command's shell ends, bwrap's init ends and the kernel kills every process
  left in it, `setsid` ones too; `--die-with-parent` does the same when Avibe itself dies (kill -9).

The network: in the sandboxed modes a command has its own network namespace - no network at
all, loopback included, so nothing Avibe or the person serves on 127.0.0.1 (`vibe serve`, a database, a dev
server) is reachable from it - unless the person's own settings say `network = "on"` (never a project's).
The host's sockets, what the next start runs or trusts, and hard links to Avibe's files are kept out of
reach too (avibe/tools/reach.py); the bwrap options are built in avibe/tools/mounts.py, the start check
is avibe/tools/layout.py. Nothing in the sandbox knows the database's password.

A tiny Python supervisor inside the sandbox runs the command and reports its exact exit status and how
many processes it left running through a file descriptor (bwrap alone reports only 128+signal, and the
kernel's kill leaves no trace of what it killed).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from avibe.errors import ToolError
from avibe.sources.process import kill_marked, process_alive, shell_program, spawn, stop_group
from avibe.tools import mounts
from avibe.tools.base import PathPolicy
from avibe.tools.guard import KeptPaths, OwnFiles
from avibe.tools.guard import protected_paths as protected_paths  # its older home
from avibe.tools.layout import MODES, sqlite_path
from avibe.tools.layout import UnsafeLayout as UnsafeLayout  # their older home
from avibe.tools.layout import check_layout as check_layout
from avibe.tools.mounts import ISOLATION
from avibe.tools.mounts import SANDBOX_HOME as SANDBOX_HOME

if TYPE_CHECKING:
    from avibe.checkpoint.stated import StatedBan

log = logging.getLogger(__name__)
READ_ONLY_ERROR: Final = "Read-only file system"  # what a write to a path mounted read-only says (EROFS)
DEFAULT_MODE: Final = "workspace-write"
# The variables a command keeps; everything else (keys, tokens, AVIBE_*, *_DATABASE_URL ...) is dropped.
KEPT_ENV: Final = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "USER", "LOGNAME"})
# Non-interactive defaults: no pager waiting for a key, no colour codes in the model's context.
QUIET_ENV: Final = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
# Without a PID namespace (full-access), a `setsid` child leaves the process group: it is found by
# this variable in its environment instead (best effort: a process that clears its environment escapes).
RUN_MARK: Final = "VIBE_SHELL_RUN"
_PROBE_TIMEOUT_S: Final = 15
_TEARDOWN_S: Final = 10

# Runs inside the sandbox as the namespace's second process (bwrap's init is the first): runs the command
# in its own process group, then writes "<exit status> <processes left running>" to the status fd. The
# command's children are counted before the kernel kills them: the model is told to use background=true.
_SUPERVISOR: Final = """
import os, signal, sys
fd, shell, command = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.setpgid(0, 0)
    try:
        os.execv(shell, [shell, "-c", command])
    finally:
        os._exit(127)
for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
    signal.signal(sig, signal.SIG_IGN)
status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
left = 0
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) not in (1, os.getpid()):
        try:
            with open("/proc/" + name + "/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        left += state not in "ZX"
os.write(fd, b"%d %d" % (status, left))
"""


class SandboxUnavailable(ToolError):
    """The sandbox cannot start on this machine; the message says why and which mode to choose."""


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start one command: argv and environment for Popen. `sandboxed` launches report their exit
    status and leftovers through the file whose descriptor was given to `SandboxPolicy.launch`."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    sandboxed: bool


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """Where and how the agent's tools work: the shell's commands run under it, and the file tools obey
    it too (`file_policy`). `hidden`: Avibe's own files (its home, the user's config folder, the database
    file ...), covered in the sandboxed modes and known to the file tools by path and identity (`own`);
    `folders`: those of them that are folders even before they exist."""

    mode: str
    workdir: Path
    hidden: tuple[Path, ...] = ()
    # The person's deny rules (gitignore-style): the paths they match when a command
    # starts are mounted read-only, so the shell cannot change what write_file and edit_file refuse.
    protected: tuple[str, ...] = ()
    folders: tuple[Path, ...] = ()
    # The paths the person's own messages forbid changing (avibe/checkpoint/stated.py), read when each
    # command starts and mounted read-only as the deny rules' are.
    stated: Callable[[], Sequence[StatedBan]] = field(default=tuple, compare=False)
    # the network and the host's sockets, each open only where the person's settings say so;
    # `kept`: what the next start runs or trusts, read-only to the shell and refused by the file tools;
    # `real_home`: the person's home, whose top level and dot folders stay read-only when the workdir
    # holds it (avibe/tools/reach.py).
    network: bool = False
    host_sockets: bool = False
    kept: tuple[Path, ...] = ()
    real_home: Path | None = None
    own: OwnFiles = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown sandbox mode {self.mode!r}; the modes are {', '.join(MODES)}")
        object.__setattr__(self, "workdir", self.workdir.resolve())
        object.__setattr__(self, "hidden", _resolved(self.hidden))
        object.__setattr__(self, "folders", _resolved(self.folders))
        object.__setattr__(self, "own", OwnFiles((*self.hidden, *self.folders)))
        object.__setattr__(self, "kept", _resolved(self.kept))
        if self.real_home is not None:
            object.__setattr__(self, "real_home", self.real_home.expanduser().resolve())

    @classmethod
    def for_record(
        cls,
        mode: str,
        workdir: Path,
        *,
        home: Path,
        database_url: str,
        protected: Sequence[str] = (),
        config_dir: Path | None = None,
        stated: Callable[[], Sequence[StatedBan]] = tuple,
        network: bool = False,
        host_sockets: bool = False,
        kept: Sequence[Path] = (),
        real_home: Path | None = None,
    ) -> SandboxPolicy:
        """The policy for a session: hides Avibe's home, the user's config folder (`config_dir`, e.g.
        ~/.config/avibe) and, for SQLite, the database file and its companions (-wal, -shm, -journal),
        wherever it lives, and its whole folder when that lies inside the working directory."""
        folders = [home] if config_dir is None else [home, config_dir]
        files: list[Path] = []
        database = sqlite_path(database_url)
        if database is not None:
            parent, work = database.resolve().parent, workdir.resolve()
            if parent != work and parent.is_relative_to(work):
                folders.append(parent)
            files += [
                database.with_name(database.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")
            ]
        hidden = (*folders, *files)
        return cls(
            mode,
            workdir,
            hidden,
            tuple(protected),
            tuple(folders),
            stated,
            network,
            host_sockets,
            tuple(kept),
            real_home,
        )

    @property
    def sandboxed(self) -> bool:
        return self.mode != "full-access"

    def file_policy(self, read_roots: Sequence[Path] = (), deny: Sequence[str] = ()) -> PathPolicy:
        """The file tools' policy under this sandbox (one policy for every tool): the same working
        directory and mode (nothing changes in read-only), Avibe's own files out of reach in the
        sandboxed modes, and the deny rules (these and `deny`) bound by identity in every mode."""
        return PathPolicy.of(
            self.workdir,
            read_roots,
            read_only=self.mode == "read-only",
            own=self.own if self.sandboxed else None,
            deny=tuple(dict.fromkeys((*self.protected, *deny))),
            kept=self._kept_paths() if self.sandboxed else None,
        )

    def _kept_paths(self) -> KeptPaths | None:
        """What the file tools refuse to change because the next start runs or trusts it: the kept paths,
        and the home's top level and dot folders when the workdir holds the home (as the shell's)."""
        home = self.real_home
        guarded = (
            home if home is not None and (home == self.workdir or home.is_relative_to(self.workdir)) else None
        )
        return KeptPaths(self.kept, guarded) if self.kept or guarded else None

    def check(self) -> None:
        """Raise SandboxUnavailable (a ToolError, shown to the model and the person) when the sandbox
        cannot start here."""
        if not self.sandboxed:
            return
        problem = bwrap_problem()
        if problem:
            raise SandboxUnavailable(
                f"shell: the {self.mode} sandbox cannot start on this machine: {problem}. Install "
                "bubblewrap (apt-get install bubblewrap) where user namespaces or root are available, or "
                "set AVIBE_SANDBOX=full-access to run commands without a sandbox (they can then read "
                "and change anything Avibe can, its record included)"
            )

    def start(self, command: str, output: IO[bytes], report: Path) -> ShellProcess:
        """Start `command` in the workdir under this policy, output into `output`; `report` is a new
        file where the sandbox reports (kept with the output). Raises SandboxUnavailable."""
        self.check()
        self.make_folders()
        with report.open("wb") as status:
            # bwrap writes its info (the namespace's init pid) and the supervisor later its status to
            # the same open file: dup'ed descriptors share the offset, so the two never overlap.
            info = os.dup(status.fileno())
            try:
                mark = "" if self.sandboxed else secrets.token_hex(8)
                launch = self.launch(
                    command, shell_program(), status_fd=status.fileno(), info_fd=info, mark=mark
                )
                fds = (status.fileno(), info) if launch.sandboxed else ()
                proc = spawn(launch.argv, launch.env, self.workdir, output, pass_fds=fds)
            finally:
                os.close(info)
        return ShellProcess(proc, report if launch.sandboxed else None, mark)

    def launch(
        self, command: str, shell: str, *, status_fd: int, info_fd: int | None = None, mark: str = ""
    ) -> Launch:
        """argv + environment that run `command` with `shell -c` under this policy. In the sandboxed
        modes, `status_fd` (inherited by the child: pass it in Popen's pass_fds) receives the exit
        status and the number of processes the command left running, `info_fd` bwrap's info. In
        full-access, `mark` is put in the environment (RUN_MARK) to find what left the process group."""
        env = scrubbed_env(os.environ, home=SANDBOX_HOME if self.sandboxed else None)
        if not self.sandboxed:
            return Launch((shell, "-c", command), {**env, RUN_MARK: mark} if mark else env, sandboxed=False)
        supervisor = (os.path.realpath(sys.executable), "-I", "-S", "-c", _SUPERVISOR)
        info = () if info_fd is None else ("--info-fd", str(info_fd))
        argv = (*self.bwrap_args(), *info, "--", *supervisor, str(status_fd), shell, command)
        return Launch(argv, env, sandboxed=True)

    def make_folders(self) -> None:
        """Make the hidden folders that lie in the writable working directory but do not exist yet (the
        user's config folder, say), empty and private: a folder the command made there could pass for
        Avibe's, and only an existing one can be covered."""
        if self.mode != "workspace-write":
            return
        for folder in self.folders:
            if folder != self.workdir and folder.is_relative_to(self.workdir) and not folder.exists():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A trusted project's config folder: made empty where it is missing, so that it is
        # bound read-only and no command can put a config.toml there that the next start applies in full.
        for kept in self.kept:
            if kept.name == ".avibe" and kept.is_relative_to(self.workdir) and kept.parent.is_dir():
                kept.mkdir(exist_ok=True)

    def bwrap_args(self) -> list[str]:
        """bwrap and its options, up to the command (avibe/tools/mounts.py)."""
        return mounts.bwrap_args(self)

    def network_note(self, output: str) -> str:
        """A line for a command's output that failed for want of a network in the sandbox (no network,
        loopback included, unless the person's own settings open it): so the model says so and asks,
        rather than retrying or working round it."""
        if not self.sandboxed or self.network or not _NETWORK_FAILED.search(output):
            return ""
        return (
            "\n[no network here: commands run without one (loopback included), so nothing outside this "
            "command can be reached. Do not try another way round; if the work needs the network, say so "
            "and ask the user, who can turn it on in their own settings.]"
        )

    def read_only_note(self, output: str) -> str:
        """A line for a command's output that hit a read-only path while the person's stated bans are in
        force: which paths and their words, so the model asks instead of trying another way round."""
        if READ_ONLY_ERROR not in output:
            return ""
        bans = list(self.stated())
        if not bans:
            return ""
        said = "; ".join(dict.fromkeys(f'#{ban.seq}: "{ban.sentence}"' for ban in bans))
        paths = ", ".join(dict.fromkeys(ban.pattern for ban in bans))
        return (
            f"\n[read-only here: {paths} - the user forbade changing it ({said}). Do not try another way "
            "round; if the work needs it changed, ask the user.]"
        )


# What a command prints when it finds no network (resolvers, curl, pip, git, npm, Python's socket).
_NETWORK_FAILED: Final = re.compile(
    r"Temporary failure in name resolution|Could not resolve host|Name or service not known|"
    r"Network is unreachable|No route to host|Connection refused|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|"
    r"getaddrinfo failed|Failed to establish a new connection"
)


@dataclass(frozen=True, slots=True)
class Ended:
    """How a command ended: its exit status (negative: the signal that killed it; None when it was
    still running and stopped here), and whether it had left processes running that were stopped."""

    code: int | None
    left_running: bool


@dataclass(frozen=True, slots=True)
class ShellProcess:
    """A command started by `SandboxPolicy.start`."""

    proc: subprocess.Popen[bytes]
    report: Path | None  # sandboxed: bwrap's info JSON, then the supervisor's "<status> <left>"
    mark: str = ""  # full-access: the value of RUN_MARK in the environment of what it started

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def sandboxed(self) -> bool:
        return self.report is not None

    def stop(self) -> Ended:
        """Kill whatever of it still runs and return once all of it is gone."""
        code = self.proc.poll()
        group_left = stop_group(self.proc)
        if self.report is None:  # full-access: the group, and what carries the run's mark (setsid ones)
            strays = bool(kill_marked(f"{RUN_MARK}={self.mark}")) if self.mark else False
            return Ended(code, (group_left or strays) and code is not None)
        init_pid, status = _read_report(self.report)
        if init_pid is not None:
            _wait_gone(init_pid)
        if code is None or status is None:  # stopped here, or the supervisor itself was killed
            return Ended(code, False)
        return Ended(status[0], status[1] > 0)


def _read_report(path: Path) -> tuple[int | None, tuple[int, int] | None]:
    """(the sandbox's init pid from bwrap's info, (status, left) from the supervisor), each None when
    it is missing (bwrap failed to start, the supervisor was killed)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    info, _, tail = text.rpartition("}")
    pid_match = re.search(r'"child-pid"\s*:\s*(\d+)', info)
    status_match = re.fullmatch(r"\s*(-?\d+) (\d+)\s*", tail)
    return (
        int(pid_match[1]) if pid_match else None,
        (int(status_match[1]), int(status_match[2])) if status_match else None,
    )


def _wait_gone(init_pid: int) -> None:
    """Wait until the sandbox's init is gone: the kernel kills the rest of its PID namespace before
    init itself ends, so then no process of the command is left. init dies with bwrap, which is
    stopped by now (--die-with-parent); the bound only guards against a stuck kernel."""
    deadline = time.monotonic() + _TEARDOWN_S
    while process_alive(init_pid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _resolved(paths: Sequence[Path]) -> tuple[Path, ...]:
    """Each path resolved, once (the database's folder is often the home)."""
    return tuple(dict.fromkeys(p.expanduser().resolve() for p in paths))


def scrubbed_env(environ: Mapping[str, str], *, home: str | None) -> dict[str, str]:
    """The allow-listed variables, the quiet defaults, and HOME (`home`, or the real one when None)."""
    env = {k: v for k, v in environ.items() if k in KEPT_ENV or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    real_home = environ.get("HOME")
    if home is not None:
        env["HOME"] = home
    elif real_home:
        env["HOME"] = real_home
    return {**env, **QUIET_ENV}


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run a sandbox here, or None when it can (tried once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [bwrap, *ISOLATION, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    try:
        done = subprocess.run(
            [*probe, "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run ({exc})"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return f"bwrap failed ({why[-1] if why else f'exit code {done.returncode}'})"
    return None
