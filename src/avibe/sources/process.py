"""Shell processes for the shell tool and background jobs: spawn in a fresh process group, stop the
whole group, read bounded output from the file the process writes to.

Output goes to a file, not a pipe: nothing has to drain it, a child that keeps a pipe open cannot hang
the caller, and a finished background job's output is still there to read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final, Literal

_HAVE_PROC: Final = Path("/proc/self/stat").exists()
STOP_GRACE_S: Final = 0.3  # after SIGTERM, how long a stopped group may take to end before SIGKILL
_MAX_POLL_S: Final = 0.05  # the longest a wait goes without looking at the stop switch
Waited = Literal["exited", "timed out", "stopped"]


def shell_program() -> str:
    """bash where installed (models write bash), else the POSIX sh."""
    return shutil.which("bash") or "/bin/sh"


def spawn(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, output: IO[bytes], *, pass_fds: Sequence[int] = ()
) -> subprocess.Popen[bytes]:
    """Start `argv` (a shell command as the sandbox built it) in its own session, so its process group
    can be stopped as a whole, with no input and stdout + stderr combined into `output`. Only `env` and
    `pass_fds` reach it: no other descriptor of Avibe's (the open database) is inherited."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=dict(env),
        close_fds=True,
        pass_fds=tuple(pass_fds),
    )


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields after the command name in /proc/PID/stat (state, ppid, pgrp ...), None when gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):  # the process ended while we looked
        return None


def _live_members(pgid: int) -> list[int]:
    """Pids of the group's processes that still run (Linux /proc): zombies are dead, whether or not
    anyone reaps them (a container's init often does not)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is not None and int(fields[2]) == pgid and fields[0] not in "ZX":
            members.append(int(stat.parent.name))
    return members


def process_alive(pid: int) -> bool:
    """True while the process runs (a zombie does not)."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return fields is not None and fields[0] not in "ZX"


def group_alive(pgid: int) -> bool:
    """True while any process of the group still runs (the leader may already be gone)."""
    if _HAVE_PROC:
        return bool(_live_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user: still there, but not ours to signal
        return True
    return True


def stop_group(proc: subprocess.Popen[bytes]) -> bool:
    """Kill the process's whole group and reap the leader. True when anything was still running."""
    alive = proc.poll() is None or group_alive(proc.pid)
    if alive:
        # It may exit between the check and the kill: then nothing is left to stop.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return alive


def wait_or_stop(proc: subprocess.Popen[bytes], timeout: float, stop: threading.Event | None) -> Waited:
    """Wait for the process to exit, for at most `timeout` seconds, or until `stop` is set (the chat's
    Ctrl-C): which came first. Looks at both at once, then ever less often (as Popen.wait
    does), never less often than every 50 ms: a quick command is not slowed, a stop is seen at once."""
    deadline, delay = time.monotonic() + timeout, 0.0005
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timed out"
        if stop is not None and stop.wait(min(delay, left)):
            return "stopped"
        if stop is None:
            time.sleep(min(delay, left))
        delay = min(delay * 2, _MAX_POLL_S)
    return "exited"


def terminate_group(pgid: int, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the whole group (a program may end cleanly: flush, remove its temporary files), then
    give it `grace_s` to be gone; what is still there then is for `stop_group`'s SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def kill_marked(entry: str) -> list[int]:
    """SIGKILL every process whose environment holds `entry` ("NAME=value"): the ones a command moved
    out of its process group (setsid, nohup + setsid). Returns their pids. Linux /proc only."""
    needle = entry.encode()
    killed = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            found = needle in environ.read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read (then not ours to kill either)
            continue
        pid = int(environ.parent.name)
        if found and pid != os.getpid() and process_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def read_bounded(path: Path, limit: int, *, tail_only: bool = False) -> tuple[str, int]:
    """The file's text if it has at most `limit` characters' worth of bytes; else its head and tail
    (or only its tail) with a note. Returns (text, total bytes). Never reads more than ~limit bytes."""
    size = path.stat().st_size
    with path.open("rb") as f:
        if size <= limit:
            return f.read().decode("utf-8", errors="replace"), size
        head = b"" if tail_only else f.read(limit // 2)
        keep = limit - len(head)
        f.seek(size - keep)
        tail = f.read()
    cut = size - len(head) - len(tail)
    note = f"[output cut: {cut} more bytes; rerun with | head, | tail or | grep to see other parts]"
    parts = [head.decode("utf-8", errors="replace"), note, tail.decode("utf-8", errors="replace")]
    return "\n".join(p for p in parts if p), size
