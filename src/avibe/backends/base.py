"""What every external agent backend shares (SPEC L5, T3): the values a turn reports, the failures it can
end in, and the one process runner that starts the real program, feeds it the harness-rendered input
and reads its JSON event lines.

A backend is a small description of one program (`Backend`): how to launch it for a turn and how to read
its event lines (`TurnReader`). The runner does all the IO. Failures are explicit values with a reason:

BackendError (AvibeError)
 +-- ProgramMissing   the program is not installed (says how to install it)
 +-- BackendFailed    it exited non-zero, was killed, or reported an error (exit code, last stderr lines)
 +-- BackendTimedOut  it said nothing for `timeout_s` seconds, or its turn took longer than `limit_s`
                     (a program that keeps saying it retries is still stopped then), and was stopped
 +-- BackendStopped   the session's stop switch was set (the chat's Ctrl-C): it was killed at once

Stopping a program (a timeout, the stop switch, a failure of ours) ends its whole process group: SIGTERM,
then SIGKILL after a short grace; the turn returns then, not when the program would have ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from avibe.errors import BackendError as BackendError  # moved there: the host catches it
from avibe.sources.process import terminate_group

STDERR_LINES: Final = 12  # how many of the program's last stderr lines a failure carries
POLL_S: Final = 0.05  # how often a silent program (and the stop switch) is checked on
STOPPED_JOIN_S: Final = 0.5  # a stopped program's output: what a grandchild holding the pipe keeps, is lost
DEFAULT_TIMEOUT_S: Final = 900.0  # silence (no event line) after which a program is taken to hang


class ProgramMissing(BackendError):
    pass


class BackendFailed(BackendError):
    def __init__(self, message: str, *, exit_code: int | None = None, stderr: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.exit_code, self.stderr = exit_code, stderr


class BackendTimedOut(BackendError):
    pass


class BackendStopped(BackendError):
    pass


class _StopAsked(Exception):
    """The stop switch was set while the program ran."""


class _TooLong(Exception):
    """The turn took longer than its limit."""


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The program started a tool call (its own tool: a shell command, an edit ...)."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolDone:
    """A tool call ended; `reason` says why it failed, in one line, as the program reported it."""

    call_id: str
    name: str
    is_error: bool = False
    output_chars: int = 0
    reason: str = ""


REASON_CHARS: Final = 300  # the most a failed tool's one-line reason keeps
_EXIT_LINE: Final = re.compile(r"exit code (-?\d+)", re.IGNORECASE)
_ERROR_TAGS: Final = re.compile(r"</?tool_use_error>")  # Claude Code wraps some of its errors in these


def _clipped(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def exit_reason(code: object, output: str) -> str:
    """A command that exited non-zero: its exit code and its output's last line (where an error is
    usually said: a compiler's, a test runner's summary, a shell's `No such file`)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return _clipped(f"exit code {code}" + (f": {lines[-1]}" if lines else ""))


def error_reason(text: str) -> str:
    """Why a tool failed, in one line, from what the program's stream said about it: its first line
    (a refused permission, an error message), or for Claude Code's `Exit code N` form the code and the
    command's last output line; "" when it said nothing."""
    lines = [line.strip() for line in _ERROR_TAGS.sub("", text).splitlines() if line.strip()]
    if not lines:
        return ""
    exited = _EXIT_LINE.fullmatch(lines[0])
    if exited is not None:
        return exit_reason(exited.group(1), "\n".join(lines[1:]))
    return _clipped(lines[0])


Activity = ToolUse | ToolDone


@dataclass(frozen=True, slots=True)
class Outcome:
    """A turn that ended in a reply: its text, the backend's own session id (to continue it next time)
    and the tool calls the program made."""

    reply: str
    backend_session: str
    calls: tuple[ToolUse, ...] = ()


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start the program for one turn: its arguments (after the program's path), what goes to
    its standard input, and environment variables to add."""

    args: tuple[str, ...]
    stdin: str = ""
    env: Mapping[str, str] = field(default_factory=dict)


class TurnReader(Protocol):
    """Reads one turn's JSON event lines; pure (no IO)."""

    # the activity this line reports; raises BackendFailed when the program cannot succeed (a refused key)
    def feed(self, event: Mapping[str, Any]) -> list[Activity]: ...
    def outcome(self) -> Outcome: ...  # after the program exited 0; raises BackendFailed on a reported error
    def problem(self) -> str: ...  # the error the program reported, if any ("" when none)


class Backend(Protocol):
    @property
    def name(self) -> str: ...  # claude-code, codex, opencode: the agent name in the record
    @property
    def label(self) -> str: ...  # Claude Code ...
    @property
    def program(self) -> str: ...  # the executable's name
    @property
    def package(self) -> str: ...  # the npm package that ships it

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch: ...
    def reader(self, session: str) -> TurnReader: ...
    def auth_hint(self) -> str: ...  # what to do when the provider refuses the key


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name} (exit code {code})"
    return f"exited with code {code}"


_AUTH_WORDS: Final = (
    "401",
    "403",
    "api key",
    "api_key",
    "api-key",
    "apikey",
    "unauthorized",
    "login",
    "auth",
)


def looks_like_auth(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _AUTH_WORDS)


def failure_text(backend: Backend, what: str, stderr: tuple[str, ...]) -> str:
    """One clear message: who failed, how, its last stderr lines, and a hint when it is about the key."""
    lines = [f"{backend.label} {what}."]
    if stderr:
        lines.append(f"Its last {len(stderr)} stderr lines:")
        lines += [f"  {line}" for line in stderr]
    if looks_like_auth(what) or any(looks_like_auth(line) for line in stderr):
        lines.append(backend.auth_hint())
    return "\n".join(lines)


def program_env(environ: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """An external agent's environment: the person's (its keys, its login, its settings) less Avibe's own
    variables - the home and database URL (a password, maybe) would let its shell write the record as the
    user; it runs as it is (L5), not over Avibe's record."""
    return {**{k: v for k, v in environ.items() if not k.startswith("AVIBE_")}, **extra}


class _Process:
    """The running program: stdout lines through a queue (so silence can time out), the stderr tail."""

    def __init__(self, argv: list[str], launch: Launch, workdir: Path) -> None:
        env = program_env(os.environ, launch.env)
        self.popen = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,  # its own process group: a wrapper's children stop with it
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._threads = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._write_in, args=(launch.stdin,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _write_in(self, text: str) -> None:
        assert self.popen.stdin is not None
        try:
            self.popen.stdin.write(text)
            self.popen.stdin.close()
        except OSError:  # it exited before reading everything; its exit code tells why
            pass

    def _read_out(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            if line.strip():
                self.stderr.append(line.rstrip()[:500])

    def events(
        self, timeout_s: float, stop: threading.Event | None = None, limit_s: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """Each JSON object line as it comes; raises TimeoutError after `timeout_s` without a line,
        _TooLong once `limit_s` have passed since it started, and _StopAsked as soon as `stop` is set.
        Once the program itself has exited, what it started (a wrapper's child) may hold the pipe open:
        the group is stopped then, so its end is not waited for."""
        last = started = time.monotonic()
        while True:
            if stop is not None and stop.is_set():
                raise _StopAsked
            if limit_s is not None and time.monotonic() - started > limit_s:
                raise _TooLong
            try:
                line = self.lines.get(timeout=POLL_S)
            except queue.Empty:
                if self.popen.poll() is not None:
                    self.stop()
                elif time.monotonic() - last > timeout_s:
                    raise TimeoutError from None
                continue
            last = time.monotonic()
            if line is None:
                return
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a plain text line among the events (a warning): not an event
            if isinstance(event, dict):
                yield event

    def stop(self) -> None:
        """Kill the whole process group (the program and what it started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def end(self) -> None:
        """Stop it now: SIGTERM to the group, SIGKILL to what is left after a short grace."""
        terminate_group(self.popen.pid)
        self.stop()

    def wait(self, join_s: float = 5.0) -> int:
        """Its exit code, once its output has been read to the end (or for `join_s`, when something
        outside its group holds the pipe); the pipes are closed after."""
        code = self.popen.wait()
        self.stop()  # whatever it left running in its group
        for thread in self._threads[:2]:
            thread.join(timeout=join_s)
        for pipe in (self.popen.stdout, self.popen.stderr):
            if pipe is not None:
                pipe.close()
        return code


def run_program(
    backend: Backend,
    executable: Path,
    prompt: str,
    *,
    session: str,
    workdir: Path,
    on_activity: Callable[[Activity], None] = lambda _: None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[int], None] = lambda _: None,
    stop: threading.Event | None = None,
    limit_s: float | None = None,
) -> Outcome:
    """Run one turn of the real program: `prompt` in (the harness-rendered inputs, T3), its events out
    through `on_activity`, its reply back. `session` is the backend's own session id to continue ("" for
    a new one). `on_start` gets the program's process id. `stop` set (the chat's Ctrl-C): the program
    is stopped at once (BackendStopped); `limit_s`: the longest the turn may take, whatever the program
    says meanwhile (`vibe run --agent-timeout`). Raises BackendError subclasses."""
    launch = backend.launch(prompt, session, workdir)
    reader = backend.reader(session)
    process = _Process([str(executable), *launch.args], launch, workdir)
    on_start(process.popen.pid)
    try:
        for event in process.events(timeout_s, stop, limit_s):
            for activity in reader.feed(event):
                on_activity(activity)
    except BaseException as exc:  # a timeout, a stop, or the caller's sink failing: the program stops too
        process.end()
        process.wait(STOPPED_JOIN_S)
        if isinstance(exc, _StopAsked):
            what = "was stopped by the user (Ctrl-C) while it worked; what it changed before is kept"
            raise BackendStopped(failure_text(backend, what, tuple(process.stderr))) from None
        if isinstance(exc, _TooLong):
            what = f"did not finish within the {limit_s:g} seconds a turn may take and was stopped"
            raise BackendTimedOut(failure_text(backend, what, tuple(process.stderr))) from None
        if isinstance(exc, BackendFailed):  # the reader saw it cannot succeed
            raise BackendFailed(failure_text(backend, str(exc), tuple(process.stderr))) from None
        if not isinstance(exc, TimeoutError):
            raise
        raise BackendTimedOut(
            failure_text(
                backend, f"said nothing for {timeout_s:g} seconds and was stopped", tuple(process.stderr)
            )
        ) from None
    code = process.wait()
    stderr = tuple(process.stderr)
    if code != 0:
        what = _describe_exit(code) + (f"; it reported: {reader.problem()}" if reader.problem() else "")
        raise BackendFailed(failure_text(backend, what, stderr), exit_code=code, stderr=stderr)
    try:
        return reader.outcome()
    except BackendFailed as exc:
        raise BackendFailed(failure_text(backend, str(exc), stderr), exit_code=0, stderr=stderr) from None
