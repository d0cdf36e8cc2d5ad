"""The real `vibe` in a real terminal (tmux) for the chat's tests: typed with send-keys, read with
capture-pane. Each test's tmux server is its own (`-L SOCKET`), and `Terminal.close` reaps everything it
ran: the server is killed (its terminals hang up), and whatever the panes started that still runs a few
seconds later - a chat that did not quit, a command it left - is killed, so no failing test leaves a chat
behind."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from avibe.sources.process import process_alive

TMUX = shutil.which("tmux")
VIBE = f"{shlex.quote(sys.executable)} -c 'from avibe.cli import main; main()'"
REAP_S = 10.0  # how long a closed terminal's processes get to end by themselves


class Terminal:
    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.seen: dict[int, str] = {}  # every process of the panes seen so far, by pid: its start time

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30, check=True
        )
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat")

    def type(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{texts} never appeared; the screen:\n{screen}")
            time.sleep(0.2)

    def processes(self) -> set[int]:
        """The panes' processes and everything they started (sandboxed ones too: /proc shows them)."""
        try:
            panes = {int(pid) for pid in self.tmux("list-panes", "-a", "-F", "#{pane_pid}").split()}
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return set()  # the server is gone
        found = descendants(panes)
        self.seen |= {pid: started for pid in found if (started := _start_time(pid))}
        return found

    def vibe_pid(self) -> int:
        """The `vibe` process the pane runs."""
        found = [pid for pid in self.processes() if b"from avibe.cli import main" in _cmdline(pid)]
        assert len(found) == 1, f"one vibe process expected, found {found}"
        return found[0]

    def kill_server(self) -> None:
        """The terminal goes away, as when its window closes: every pane's tty hangs up."""
        self.processes()  # known now, reaped by `close` if they outlive it
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)

    def close(self) -> list[int]:
        """Kill the server and reap what it ran; the pids that had to be killed (SIGKILL)."""
        self.kill_server()
        deadline = time.monotonic() + REAP_S
        while (left := self._alive()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left

    def _alive(self) -> list[int]:
        """The processes seen that still run (a pid used again by another process is not one)."""
        return [
            pid for pid, started in self.seen.items() if process_alive(pid) and _start_time(pid) == started
        ]


def descendants(roots: set[int]) -> set[int]:
    """`roots` and every process below them."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def open_vibe(tmp_path: Path, env: dict[str, str], args: tuple[str, ...], *, before: str = "") -> Terminal:
    """`vibe ARGS` in a new tmux terminal of 110x32, in `tmp_path/work`, with only `env`'s AVIBE_ and
    OPENAI_ settings; `before` goes in front of the command (`setsid -w`). When vibe ends the pane says
    EXIT:code and stays open."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {k: v for k, v in env.items() if k.startswith(("AVIBE_", "OPENAI_"))}
    env |= {"TERM": "xterm-256color", "PYTHONPATH": os.pathsep.join(sys.path)}
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    inherited = [k for k in os.environ if k.startswith(("AVIBE_", "OPENAI_"))]
    unset = f"unset COLUMNS LINES {' '.join(inherited)}\n"  # the terminal's own size, not a runner's
    term = Terminal(f"avibe-test-{os.getpid()}-{time.monotonic_ns()}")
    script = tmp_path / f"vibe-{term.socket}.sh"
    command = " ".join([before, VIBE, *map(shlex.quote, args)]).strip()
    script.write_text(f"{unset}{exports}cd {shlex.quote(str(work))}\n{command}\necho EXIT:$?\nsleep 120\n")
    term.tmux("new-session", "-d", "-s", "chat", "-x", "110", "-y", "32", f"sh {shlex.quote(str(script))}")
    return term


def _start_time(pid: int) -> str:
    """When the process started (clock ticks since boot), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""
