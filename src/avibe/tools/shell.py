"""shell: run a command in the workdir, with a timeout, or in the background (SPEC S3).

Every command runs under the session's `SandboxPolicy` (avibe/tools/sandbox.py: Avibe's home and record
out of sight, a scrubbed environment); where the sandbox cannot start, the tool refuses and
says which mode to choose. On timeout everything the command started is killed and the output says so.
Processes a finished command left running are stopped too, `setsid` ones included (long-running work
belongs in the background, where its id is tracked). Output is stdout and stderr combined, head and
tail kept when long. The session's stop switch (the chat's Ctrl-C) stops a running command at
once: SIGTERM to everything it started, SIGKILL after a short grace, and the output says it was stopped.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.sources.background import BackgroundJobs
from avibe.sources.process import read_bounded, terminate_group, wait_or_stop
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import MAX_OUTPUT_CHARS, BaseTool, schema
from avibe.tools.sandbox import DEFAULT_MODE, SandboxPolicy

DEFAULT_TIMEOUT_S: Final = 60
MAX_TIMEOUT_S: Final = 600
_STARTED: Final = re.compile(r"\Astarted (\S+) in the background: (.*)$", re.MULTILINE)


def started_text(job_id: str, command: str) -> str:
    """What the tool answers when it starts a background job (S3): its id first, then how it reports."""
    return (
        f"started {job_id} in the background: {command}\n"
        f"Its exit code and last output will arrive as a callback message tagged ({job_id}); "
        "go on with other work meanwhile instead of polling for it."
    )


def started_job(output: str) -> tuple[str, str] | None:
    """(job id, command) when `output` is this tool's answer for a background start, else None. A
    recorded session read back (the eval's replay) learns its jobs from the tool's own words here; the
    carry-parity test runs the tool itself, so the two cannot drift apart unnoticed."""
    found = _STARTED.search(output)
    return (found.group(1), found.group(2)) if found else None


class Shell(BaseTool):
    """Run a shell command; `background=true` returns at once with an id like `bg-3`. `sandbox`
    defaults to the default mode over `workdir` with nothing extra hidden; sessions pass theirs
    (`SandboxPolicy.for_record`), whose workdir must be `workdir`."""

    def __init__(
        self,
        workdir: Path,
        jobs: BackgroundJobs | None = None,
        *,
        sandbox: SandboxPolicy | None = None,
        max_timeout_s: int = MAX_TIMEOUT_S,
        approval: ApprovalPolicy | None = None,
        stop: threading.Event | None = None,
    ):
        self._sandbox = sandbox or SandboxPolicy(DEFAULT_MODE, workdir)
        if self._sandbox.workdir != workdir.resolve():
            raise ValueError(f"the sandbox is for {self._sandbox.workdir}, the shell for {workdir}")
        self._jobs, self._max_timeout = jobs, max_timeout_s
        self._approval = approval  # ask mode: a command no allow rule covers waits for the person
        self._stop = stop  # the session's stop switch: set, the running command is killed
        background = (
            "true: start it and return at once with an id; its exit code and last output arrive later "
            "as a callback message tagged with that id (for servers, long builds, long tests)"
        )
        self._spec = ToolSpec(
            name="shell",
            description=(
                f"Run a bash command in the working directory; returns the exit code and the output "
                f"(stdout and stderr). Stopped after timeout_s seconds (default {DEFAULT_TIMEOUT_S}). "
                "No input can be typed: use non-interactive flags."
            ),
            parameters=schema(
                {
                    "command": ("string", "the command line, e.g. pytest -q tests/test_x.py"),
                    "timeout_s": ("integer", f"seconds before it is killed (1-{max_timeout_s})"),
                    "background": ("boolean", background),
                },
                required=["command"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        command = args["command"]
        if not command.strip():
            raise ToolError("shell: command is empty")
        timeout = args.get("timeout_s")
        if timeout is not None and not 1 <= timeout <= self._max_timeout:
            raise ToolError(f"shell: timeout_s must be between 1 and {self._max_timeout}, got {timeout}")
        if self._approval is not None:
            self._approval.check_command(command)  # before anything runs
        if args.get("background", False):
            return self._background(command, timeout)
        self._sandbox.check()  # refuse, naming the mode to choose, before anything runs
        return self._foreground(command, DEFAULT_TIMEOUT_S if timeout is None else timeout)

    def _background(self, command: str, timeout: int | None) -> ToolResult:
        if self._jobs is None:
            raise ToolError("shell: background commands are not available here; run it in the foreground")
        job = self._jobs.start(command, timeout)
        return ToolResult(output=started_text(job.id, command))

    def _foreground(self, command: str, timeout: int) -> ToolResult:
        with tempfile.TemporaryDirectory(prefix="avibe-sh-") as tmp:
            out_path = Path(tmp) / "output"
            with out_path.open("wb") as output:
                process = self._sandbox.start(command, output, Path(tmp) / "report")
            started = time.monotonic()
            try:
                waited = wait_or_stop(process.proc, timeout, self._stop)  # timed out: `stop` kills it
                if waited == "stopped":
                    terminate_group(process.pid)  # SIGTERM first; `stop` kills what is left
            finally:  # also when this thread is interrupted (Ctrl-C in `vibe run`): nothing is left running
                ended = process.stop()
            text, _ = read_bounded(out_path, MAX_OUTPUT_CHARS)
        if waited == "stopped":
            return ToolResult(output=self._stopped(time.monotonic() - started, text), is_error=True)
        note = self._sandbox.read_only_note(text)  # a path the person forbade: which, in their words
        note += self._sandbox.network_note(text)  # no network in the sandbox: ask, don't work round it
        shown = self._render(ended.code, ended.left_running, timeout, text) + note
        return ToolResult(output=shown, is_error=ended.code is None)

    @staticmethod
    def _stopped(seconds: float, text: str) -> str:
        head = (
            f"stopped by the user (Ctrl-C) after {seconds:.1f} s: the command and every process it started "
            "were killed; it may have done part of its work. Check before running it again."
        )
        return f"{head}\n{text.rstrip()}" if text.strip() else f"{head}\n(no output)"

    @staticmethod
    def _render(code: int | None, leftovers: bool, timeout: int, text: str) -> str:
        if code is None:
            head = (
                f"timed out after {timeout} s: the command and every process it started were killed. "
                "Use a larger timeout_s, or background=true for long-running commands."
            )
        else:
            head = f"exit code: {code}" if code >= 0 else f"killed by signal {-code}"
        if leftovers:
            head += "\n[processes it left running were stopped; use background=true for long-running ones]"
        return f"{head}\n{text.rstrip()}" if text.strip() else f"{head}\n(no output)"
