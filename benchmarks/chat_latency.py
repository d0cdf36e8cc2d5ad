"""The chat's responsiveness in a real terminal (a pty): time to first paint, time until the session is
open (the embedded model loads after the screen is up), and keystroke-to-screen latency - with the chat
idle, and while the embedded model generates a reply - then how long Ctrl-C takes to stop that step.

Each keystroke is a character typed once only (Greek and Cyrillic letters), so its first appearance in
the terminal's output after the key was written is when it reached the screen.

Then how long Ctrl-C takes to stop work already running: the status bar back to idle after a
Ctrl-C while a real `sleep` runs in the shell tool (bubblewrap; the tests' scripted OpenAI-compatible model
asks for it) and while Claude Code works (the real program, from `vibe agents install` or the tests'
cache, waiting on the tests' scripted provider, which answers after HOLD_S). `--compare-with REV` measures
those on another git revision too (a temporary worktree, run in a subprocess), side by side; `--stops-only`
measures only them (no embedded model needed).

Run: `.venv/bin/python benchmarks/chat_latency.py [--model embedded] [--keys 20] [--compare-with REV]
[--stops-only]` (the embedded part needs `vibe models install`). A temporary AVIBE_HOME and working
folder; prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "backends"))

KEYS = "αβγδεζηθικλμνξοπρστυφχψωбгджзилпфцчшщэюя"
PROMPT = "Write a 250-word story about a lighthouse keeper who counts ships. Plain text, no tools."


class Pty:
    """`vibe chat` on a pseudo-terminal of 110x32; everything it writes, with the time it arrived."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 32, 110, 0, 0))
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        os.close(slave)
        self.data = bytearray()
        self.arrivals: list[tuple[int, float]] = []  # (end offset of a chunk, when it arrived)
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.changed:
                self.data += chunk
                self.arrivals.append((len(self.data), time.monotonic()))
                self.changed.notify_all()

    def write(self, text: str) -> int:
        """Type `text`; the output offset at that moment."""
        with self.changed:
            offset = len(self.data)
        os.write(self.master, text.encode())
        return offset

    def wait_for(self, text: str, after: int = 0, timeout: float = 600.0) -> float | None:
        """When `text` first appeared in the output past offset `after` (monotonic time), or None."""
        needle, deadline = text.encode(), time.monotonic() + timeout
        with self.changed:
            while True:
                found = self.data.find(needle, after)
                if found >= 0:
                    end = found + len(needle)
                    return next(at for offset, at in self.arrivals if offset >= end)
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.changed.wait(min(left, 0.5))

    def seen(self, text: str, after: int = 0) -> bool:
        with self.changed:
            return self.data.find(text.encode(), after) >= 0


def _stats(name: str, samples: list[float]) -> None:
    if not samples:
        print(f"{name}: no samples")
        return
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"{name}: n={len(ms)}  p50 {statistics.median(ms):.1f} ms  p95 {p95:.1f} ms  max {ms[-1]:.1f} ms")


def _keystrokes(term: Pty, keys: str, gap: float) -> list[float]:
    latencies = []
    for key in keys:
        offset = term.write(key)
        sent = time.monotonic()
        arrived = term.wait_for(key, after=offset, timeout=10)
        if arrived is not None:
            latencies.append(arrived - sent)
        time.sleep(gap)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--keys", type=int, default=20, help="keystrokes per phase (at most 20)")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between keystrokes")
    parser.add_argument("--compare-with", metavar="REV", help="also measure the stops on this git revision")
    parser.add_argument("--stops-only", action="store_true", help="measure only Ctrl-C on running work")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.json:  # a revision measured for --compare-with: the stops, as one JSON line
        print(json.dumps(measure_stops()))
        return
    if not options.stops_only:
        _typing(options)
    here = measure_stops()
    other = _stops_at(options.compare_with) if options.compare_with else None
    _print_stops(here, other, options.compare_with)


def _typing(options: argparse.Namespace) -> None:
    count = min(options.keys, len(KEYS) // 2)
    idle_keys, busy_keys = KEYS[:count], KEYS[count : 2 * count]
    root = Path(tempfile.mkdtemp(prefix="vibe-chat-bench-"))
    (root / "work").mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("AVIBE_") and k not in ("COLUMNS", "LINES")
    }
    env |= {"AVIBE_HOME": str(root / "home"), "AVIBE_MODEL": options.model, "TERM": "xterm-256color"}
    if "AVIBE_MODEL_CACHE" in os.environ:
        env["AVIBE_MODEL_CACHE"] = os.environ["AVIBE_MODEL_CACHE"]
    command = [sys.executable, "-c", "from avibe.cli import main; main()", "chat"]
    term = Pty(command, env, root / "work")
    try:
        _run(term, idle_keys, busy_keys, options.gap, options.model)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
        term.proc.wait()


def _run(term: Pty, idle_keys: str, busy_keys: str, gap: float, model: str) -> None:
    painted = term.wait_for("loading the model", timeout=120)
    opened = term.wait_for("new session", timeout=600)
    if painted is None or opened is None:
        print("the chat did not start; its output:\n" + term.data.decode(errors="replace")[-2000:])
        return
    print(f"model: {model}; cores: {os.cpu_count()}; terminal 110x32")
    print(f"time to first paint (process start -> screen with status bar): {painted - term.started:.2f} s")
    print(f"session open, model loaded (process start -> 'new session'): {opened - term.started:.2f} s")
    term.wait_for("idle", timeout=60)
    _stats("keystroke -> screen, idle", _keystrokes(term, idle_keys, gap))
    for _ in idle_keys:  # clear what was typed
        term.write("\x7f")
    time.sleep(0.5)
    offset = term.write(PROMPT)
    term.wait_for(PROMPT[-20:], after=offset, timeout=30)
    offset = term.write("\r")
    sent = time.monotonic()
    if term.wait_for("working", after=offset, timeout=60) is None:
        print("the turn did not start")
        return
    busy = _keystrokes(term, busy_keys, gap)
    streamed = term.wait_for("vibey›", after=offset, timeout=0.01)
    if streamed is not None:
        print(f"enter -> first streamed words of the reply: {streamed - sent:.2f} s")
    working = not term.seen("idle", after=offset)
    what = "reading the prompt / generating" if working else "partly after the turn had ended"
    _stats(f"keystroke -> screen, while the model works ({what})", busy)
    if working:
        cancel_at = term.write("\x03")
        pressed = time.monotonic()
        stopped = term.wait_for("step cancelled", after=cancel_at, timeout=300)
        if (
            stopped is not None
        ):  # a call that streams stops at its next piece; one that does not, when it returns
            print(f"Ctrl-C -> 'step cancelled' on screen: {stopped - pressed:.2f} s")
    term.write("\x03")
    time.sleep(0.3)
    term.write("\x03")
    term.proc.wait(30)


# ---- Ctrl-C on work already running ---------------------------------------------------------

SLEEP_S = 30  # the shell command: a `sleep` this long
HOLD_S = 30  # the provider answers Claude Code after this long (a revision that cannot stop it waits)
SETTLE_S = 1.0  # the work runs this long before Ctrl-C
STOP_WAIT_S = 90.0  # the longest a stop is waited for


def _running(argument: str) -> bool:
    """A process (in any PID namespace) whose command line holds `argument`."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if argument.encode() in cmdline.read_bytes().split(b"\0"):
                return True
    return False


def _until(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.05)
    return False


def _ctrl_c_to_idle(term: Pty) -> float | None:
    """Ctrl-C, then the seconds until the status bar says idle again (the work stopped), or None."""
    offset = term.write("\x03")
    pressed = time.monotonic()
    idle = term.wait_for("idle", after=offset, timeout=STOP_WAIT_S)
    return None if idle is None else idle - pressed


def _quit(term: Pty) -> None:
    time.sleep(3.2)  # a second Ctrl-C within 3 s of the first quits; these are new ones
    term.write("\x03")
    time.sleep(0.3)
    term.write("\x03")
    with contextlib.suppress(subprocess.TimeoutExpired):
        term.proc.wait(30)
    if term.proc.poll() is None:
        term.proc.kill()


def _chat_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_", "ANTHROPIC_"))}
    env.pop("COLUMNS", None), env.pop("LINES", None)
    return env | {"AVIBE_HOME": str(root / "home"), "TERM": "xterm-256color",
                  "AVIBE_SANDBOX": "workspace-write", "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip


@contextlib.contextmanager
def _chat(root: Path, env: dict[str, str], *args: str) -> Iterator[Pty | None]:
    (root / "work").mkdir(parents=True, exist_ok=True)
    term = Pty(
        [sys.executable, "-c", "from avibe.cli import main; main()", "chat", *args], env, root / "work"
    )
    try:
        opened = term.wait_for("new session", timeout=120) and term.wait_for("idle", timeout=60)
        yield term if opened else None
    finally:
        _quit(term)


def _stop_shell() -> float | None:
    """Ctrl-C while the shell tool runs a real `sleep` in bubblewrap."""
    from openai_chat import serve_chat

    marker = f"{SLEEP_S}.{os.getpid() % 1000}"
    root = Path(tempfile.mkdtemp(prefix="vibe-stop-bench-"))
    with serve_chat() as model:
        model.call("shell", command=f"sleep {marker}", timeout_s=600)
        model.say("Stopped.")
        env = _chat_env(root) | {"AVIBE_MODEL": "openai/gpt-4o", "OPENAI_API_KEY": "sk-bench",
                                 "OPENAI_BASE_URL": model.url}  # fmt: skip
        with _chat(root, env) as term:
            if term is None:
                return None
            term.write("Run the long job\r")
            if not _until(lambda: _running(marker), 60):
                return None
            time.sleep(SETTLE_S)
            return _ctrl_c_to_idle(term)


def _claude_bin() -> Path | None:
    """Claude Code as the tests install it (their cache, keyed by the shipped lockfile), else on PATH."""
    import avibe.backends
    from avibe.backends.install import installed_bin

    lockfile = Path(avibe.backends.__file__).parent / "npm" / "package-lock.json"
    cache = Path(os.environ.get("AVIBE_TEST_AGENTS_CACHE", Path.home() / ".cache" / "avibe-test-agents"))
    folder = installed_bin(cache / hashlib.sha256(lockfile.read_bytes()).hexdigest()[:16] / "home")
    if (folder / "claude").exists():
        return folder
    found = shutil.which("claude")
    return Path(found).parent if found else None


def _stop_agent() -> float | None:
    """Ctrl-C while Claude Code works (its request to the scripted provider held for HOLD_S)."""
    from agent_provider import serve_provider

    folder = _claude_bin()
    if folder is None:
        return None
    root = Path(tempfile.mkdtemp(prefix="vibe-stop-bench-"))
    with serve_provider() as provider:
        provider.hold = threading.Event()
        release = threading.Timer(HOLD_S, provider.hold.set)
        env = _chat_env(root) | {"ANTHROPIC_BASE_URL": provider.url, "ANTHROPIC_API_KEY": "sk-ant-bench",
                                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HOME": str(root / "user"),
                                 "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
        try:
            with _chat(root, env, "--agent", "claude-code") as term:
                if term is None:
                    return None
                term.write("Say hello\r")
                if not provider.arrived.wait(60):
                    return None
                release.start()
                time.sleep(SETTLE_S)
                return _ctrl_c_to_idle(term)
        finally:
            release.cancel()
            provider.hold.set()


def measure_stops() -> dict[str, float | None]:
    return {"shell": _stop_shell(), "agent": _stop_agent()}


def _stops_at(revision: str) -> dict[str, float | None]:
    """The stops measured on another revision of Avibe (a git worktree), in a subprocess."""
    folder = Path(tempfile.mkdtemp(prefix="avibe-bench-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": str(folder / "src")}
        out = subprocess.run([sys.executable, __file__, "--json"], env=env, check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
        found: dict[str, float | None] = json.loads(out.splitlines()[-1])
        return found
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)


def _print_stops(
    here: dict[str, float | None], other: dict[str, float | None] | None, rev: str | None
) -> None:
    def shown(value: float | None) -> str:
        return "not stopped" if value is None else f"{value:.2f} s"

    print(f"Ctrl-C -> stopped (status bar back to idle), goal under 1 s; cores: {os.cpu_count()}")
    print(f"  {'':44} {'this tree':>12}" + (f" {'at ' + str(rev):>14}" if other else ""))
    rows = (("shell", f"while `sleep {SLEEP_S}` runs in the shell tool"),
            ("agent", f"while Claude Code works (answers after {HOLD_S} s)"))  # fmt: skip
    for key, label in rows:
        print(f"  {label:44} {shown(here[key]):>12}" + (f" {shown(other[key]):>14}" if other else ""))


if __name__ == "__main__":
    main()
