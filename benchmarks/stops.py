"""Ctrl-C on work already running, in the real `vibe chat` on a pseudo-terminal (benchmarks/chat_latency.py
prints them, side by side with another revision's with `--compare-with REV`): the seconds from Ctrl-C
until the work stopped -

- prompt:   the embedded model reads a long prompt (the chat back to idle);
- stream:   the embedded model writes a long reply, WRITING_LEAD_S into the turn (the chat back to idle);
- shell:    a real `sleep` runs in the shell tool, bubblewrap (the chat back to idle);
- agent:    Claude Code works, its provider answering after HOLD_S (the chat back to idle);
- attached: `vibe serve` runs a real `sleep` for the session, and a chat attached to it from another
            terminal is sent Ctrl-C (the host's `sleep` gone).

None where it could not be measured here (no embedded model, no Claude Code, no bubblewrap) or did not
stop within STOP_WAIT_S. The scripted models are the tests' (tests/openai_chat.py)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "backends"))


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
def _chat(root: Path, env: dict[str, str], *args: str, opened: str = "new session") -> Iterator[Pty | None]:
    (root / "work").mkdir(parents=True, exist_ok=True)
    term = Pty(
        [sys.executable, "-c", "from avibe.cli import main; main()", "chat", *args], env, root / "work"
    )
    try:
        ready = term.wait_for(opened, timeout=300) and term.wait_for("idle", timeout=60)
        yield term if ready else None
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


def _stop_embedded(prompt: str, started: str, lead: float = 0.0) -> float | None:
    """Ctrl-C once the embedded model has been at work on `prompt` for SETTLE_S (and `lead`) past
    `started` on the screen ("working")."""
    from avibe.config import load_settings
    from avibe.providers.modelfile import EMBEDDED_MODELS, model_path

    model = os.environ.get("AVIBE_BENCH_EMBEDDED", "embedded")  # the 0.5B: the smallest on 2 cores
    if not model_path(load_settings().model_cache, EMBEDDED_MODELS[model]).exists():
        return None
    root = Path(tempfile.mkdtemp(prefix="vibe-stop-bench-"))
    env = _chat_env(root) | {"AVIBE_MODEL": model}
    if "AVIBE_MODEL_CACHE" in os.environ:
        env["AVIBE_MODEL_CACHE"] = os.environ["AVIBE_MODEL_CACHE"]
    with _chat(root, env) as term:
        if term is None:
            return None
        offset = term.write(prompt + "\r")
        if term.wait_for(started, after=offset, timeout=600) is None:
            return None
        time.sleep(SETTLE_S + lead)
        return _ctrl_c_to_idle(term)


# a prompt the embedded model reads for many seconds on few cores (one line: Enter would send it)
LONG_PROMPT = (
    "Here is a build log. "
    + " ".join(f"line {i}: service-{i % 7} build {i} FAILED at step {i % 13};" for i in range(400))
    + " How many builds failed?"
)
STORY = "Write a 400-word story about a lighthouse keeper who counts ships. Plain text, no tools."
# Waiting for the reply's mark on the screen found none within 600 s on 2 idle cores (2026-12-07), so the
# stop is asked this long into the turn instead: the short prompt is read by then (a few seconds) and the
# model is writing (the ~500-token story, or a tool call, which shows nothing: either way it generates).
WRITING_LEAD_S = 20.0


def _serve_helpers() -> tuple[Any, Callable[..., Any]]:
    """The tests' helpers for `vibe serve`, and how to post the person's message: this tree's (through the
    local socket), or - measuring an older revision of Avibe, which has no local socket - that revision's
    own helpers and its HTTP API with the token."""
    try:
        import serve_support

        return serve_support, serve_support.post_message
    except ImportError:
        tests = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).parent / "tests"
        spec = importlib.util.spec_from_file_location("serve_support_at_revision", tests / "serve_support.py")
        assert spec is not None and spec.loader is not None
        helpers = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helpers)

        def post(home: Path, port: int, session: str, text: str) -> Any:
            import httpx

            url = f"http://127.0.0.1:{port}/sessions/{session}/messages"
            return httpx.post(url, json={"text": text}, headers=helpers.serve_auth(home), timeout=10)

        return helpers, post


def _stop_attached() -> float | None:
    """`vibe serve` runs a real `sleep` for the session; Ctrl-C in a chat attached from elsewhere; the
    seconds until the host's `sleep` is gone (None: a revision whose attached chat cannot stop the host,
    the `sleep` still running after STOP_WAIT_S)."""
    from openai_chat import serve_chat

    helpers, post_message = _serve_helpers()
    free_port, start_serve, stop = helpers.free_port, helpers.start_serve, helpers.stop

    marker = f"{STOP_WAIT_S * 10:.0f}.{os.getpid() % 1000}7"  # outlasts the chat's start and the wait
    root = Path(tempfile.mkdtemp(prefix="vibe-stop-bench-"))
    (root / "work").mkdir()
    with serve_chat() as model:
        model.say("Ready.")
        model.call("shell", command=f"sleep {marker}", timeout_s=600)
        model.say("Stopped.")
        port = free_port()
        env = _chat_env(root) | {"AVIBE_MODEL": "openai/gpt-4o", "OPENAI_API_KEY": "sk-bench",
                                 "OPENAI_BASE_URL": model.url, "AVIBE_USER": "kofi",
                                 "AVIBE_SERVE_URL": f"http://127.0.0.1:{port}"}  # fmt: skip
        vibe = [sys.executable, "-c", "from avibe.cli import main; main()"]
        first = subprocess.run([*vibe, "run", "--no-wait", "--json", "Wait for my go."], env=env,
                               cwd=root / "work", capture_output=True, text=True, timeout=120)  # fmt: skip
        session = next(json.loads(x)["session"] for x in first.stdout.splitlines() if '"turn_started"' in x)
        serve = start_serve(env, root / "work", port, root / "serve.log")
        try:
            post_message(root / "home", port, session, "Run the long job.")
            if not _until(lambda: _running(marker), 60):
                return None
            with _chat(root, env, "--session", session, opened="attached to") as term:
                if term is None:
                    return None
                time.sleep(SETTLE_S)  # the chat has looked at the host's state
                if not _running(marker):
                    return None  # not the stop measured
                term.write("\x03")
                pressed = time.monotonic()
                gone = _until(lambda: not _running(marker), STOP_WAIT_S)
                return time.monotonic() - pressed if gone else None
        finally:
            stop(serve)


def measure_stops(only: Collection[str] = ()) -> dict[str, float | None]:
    """Each stop in turn (those named in `only`, when given), each said on stderr as it is measured (a
    long run shows where it is)."""
    measures: dict[str, Callable[[], float | None]] = {
        "prompt": lambda: _stop_embedded(LONG_PROMPT, "working"),
        "stream": lambda: _stop_embedded(STORY, "working", WRITING_LEAD_S),
        "shell": _stop_shell, "agent": _stop_agent, "attached": _stop_attached,
    }  # fmt: skip
    found: dict[str, float | None] = {}
    for name, measure in measures.items():
        if only and name not in only:
            continue
        found[name] = measure()
        print(
            f"[{os.environ.get('PYTHONPATH', 'this tree')}] {name}: {found[name]}",
            file=sys.stderr,
            flush=True,
        )
    return found


def stops_at(revision: str, only: Collection[str] = ()) -> dict[str, float | None]:
    """The stops measured on another revision of Avibe (a git worktree), in a subprocess."""
    folder = Path(tempfile.mkdtemp(prefix="avibe-bench-rev-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(folder), revision], check=True
    )
    try:
        env = {**os.environ, "PYTHONPATH": str(folder / "src")}
        script = ROOT / "benchmarks" / "chat_latency.py"  # this tree's benchmark, that revision's Avibe
        only_args = ["--only", ",".join(only)] if only else []
        out = subprocess.run([sys.executable, str(script), "--json", *only_args], env=env, check=True,
                             stdout=subprocess.PIPE, text=True).stdout  # fmt: skip
        found: dict[str, float | None] = json.loads(out.splitlines()[-1])
        return found
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False)


def print_stops(
    here: dict[str, float | None], other: dict[str, float | None] | None, rev: str | None
) -> None:
    def shown(value: float | None) -> str:
        return "not stopped" if value is None else f"{value:.2f} s"

    print(f"Ctrl-C -> stopped (status bar back to idle), goal under 1 s; cores: {os.cpu_count()}")
    print(f"  {'':44} {'this tree':>12}" + (f" {'at ' + str(rev):>14}" if other else ""))
    rows = (("prompt", "while the embedded model reads a long prompt"),
            ("stream", "while the embedded model streams a reply"),
            ("shell", f"while `sleep {SLEEP_S}` runs in the shell tool"),
            ("agent", f"while Claude Code works (answers after {HOLD_S} s)"),
            ("attached", "attached chat; vibe serve runs the sleep"))  # fmt: skip
    for key, label in rows:
        if key not in here:
            continue  # not asked for (--only)
        there = (other or {}).get(key)  # a revision without this measure printed none
        print(f"  {label:44} {shown(here.get(key)):>12}" + (f" {shown(there):>14}" if other else ""))
    print("  (attached: until the host's `sleep` is gone)")
