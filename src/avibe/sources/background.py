"""Background shell commands whose completion arrives later as a tagged callback input (SPEC S3, T1).

`BackgroundJobs.start` launches a command under the session's sandbox policy (avibe/tools/sandbox.py)
and returns its id (`bg-1`, `bg-2` ... per session, never reused, also across restarts). Nothing runs
behind the loop's back: no thread touches the record. The loop calls `collect_finished()` between model
calls; each finished job is handed to the `Delivery` port (the orchestration passes ingress in: adapters
never call back up, DESIGN layers) as a `callback` input with `Source(kind="callback", name="shell",
ref=<id>)`, so the model sees it with a harness-written tag naming the id. `running()` lists the ids
still pending (the scene's "waiting for"). Ids and running jobs are kept in the session state, so a
restart reports the jobs it lost.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from avibe.errors import ToolError
from avibe.ports import Clock, Delivery, RecordStore
from avibe.record.entries import Entry, Source
from avibe.record.state import JobsState, LostJob
from avibe.sources.process import read_bounded

if TYPE_CHECKING:  # only the type: avibe.tools imports this module (the policy object is passed in)
    from avibe.tools.sandbox import SandboxPolicy, ShellProcess

log = logging.getLogger(__name__)

STATE_KEY: Final = JobsState.KEY
DEFAULT_TAIL_CHARS: Final = 2_000
LATEST_LINE_CHARS: Final = 400  # how much of a running job's log is read for its newest line (the scene)
DEFAULT_MAX_RUNNING: Final = 8
_POLL_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A background command still running."""

    id: str
    command: str
    started_at: datetime


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """A background command that ended, and the callback entry that told the session.

    outcome: "exited", "timed out" (its own timeout), "killed" (kill_all) or "lost" (Avibe restarted
    while it ran). exit_code is None unless it exited by itself.
    """

    id: str
    command: str
    outcome: str
    exit_code: int | None
    entry: Entry


@dataclass(slots=True)
class _Job:
    info: JobInfo
    process: ShellProcess
    log_path: Path
    started: float  # monotonic
    deadline: float | None


def _storable(text: str) -> str:
    """Command output as any record backend can hold it: no NUL bytes, no lone surrogates."""
    return text.replace("\x00", "\\0").encode("utf-8", errors="replace").decode("utf-8")


class BackgroundJobs:
    """The background commands of one session. `deliver` records each completion (ingress in the
    orchestration); `store` keeps only the job table (ids, what ran) in the session state; commands run
    under `sandbox`."""

    def __init__(
        self,
        deliver: Delivery,
        store: RecordStore,
        session_id: str,
        sandbox: SandboxPolicy,
        *,
        log_dir: Path | None = None,
        clock: Clock | None = None,
        tail_chars: int = DEFAULT_TAIL_CHARS,
        max_running: int = DEFAULT_MAX_RUNNING,
    ) -> None:
        self._deliver_input, self._store, self._session, self._sandbox = deliver, store, session_id, sandbox
        self._log_dir, self._clock = log_dir, clock
        self._made_log_dir = False
        self._tail_chars, self._max_running = tail_chars, max_running
        self._jobs: dict[str, _Job] = {}
        state = JobsState.from_stored(store.load_state(session_id, STATE_KEY))
        self._next_number = state.next_number
        # the jobs a previous process of this session never reported
        self._lost: dict[str, LostJob] = dict(state.running)

    def start(self, command: str, timeout_s: float | None = None) -> JobInfo:
        """Launch `command` in the workdir. ToolError (for the model) when `max_running` already run;
        SandboxUnavailable (a ToolError) when the sandbox cannot start here."""
        if len(self._jobs) >= self._max_running:
            ids = ", ".join(self._jobs)
            raise ToolError(f"{len(self._jobs)} background commands already run ({ids}); wait for one")
        self._sandbox.check()  # before an id is used up
        job_id = f"bg-{self._next_number}"
        self._next_number += 1
        log_path = self._logs() / f"{job_id}.log"
        with log_path.open("wb") as output:
            process = self._sandbox.start(command, output, log_path.with_suffix(".report"))
        now = time.monotonic()
        info = JobInfo(job_id, command, self._now())
        self._jobs[job_id] = _Job(
            info, process, log_path, now, None if timeout_s is None else now + timeout_s
        )
        self._save()
        log.info("background %s started: %s", job_id, command)
        return info

    def waiting(self) -> list[tuple[str, str, str, str]]:
        """(id, command, log path, newest output line) of each job still running: what the scene's
        "Waiting for" names (S3)."""
        return [
            (job.info.id, job.info.command, str(job.log_path), self._latest_line(job.log_path))
            for job in self._jobs.values()
        ]

    def _latest_line(self, path: Path) -> str:
        """The last non-blank line the job has written (read from the log's tail only)."""
        try:
            text, _ = read_bounded(path, LATEST_LINE_CHARS, tail_only=True)
        except OSError:  # the log is gone or unreadable: the scene names the job without it
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        lines = [line for line in lines if not line.startswith("[output cut:")]  # read_bounded's own note
        return lines[-1] if lines else ""

    def running(self) -> list[JobInfo]:
        """The jobs not yet delivered as finished, oldest first."""
        return [job.info for job in self._jobs.values()]

    def collect_finished(self) -> list[FinishedJob]:
        """Deliver every job that ended (or passed its timeout) since the last call, plus, on the first
        call, the jobs a previous Avibe process left unfinished. Call it between model calls."""
        done = [self._report_lost(job_id, job) for job_id, job in self._lost.items()]
        self._lost.clear()
        for job in list(self._jobs.values()):
            if job.process.proc.poll() is not None:
                ended = job.process.stop()  # what it left running would be untracked otherwise
                done.append(self._finish(job, "exited", code=ended.code, leftovers=ended.left_running))
            elif job.deadline is not None and time.monotonic() >= job.deadline:
                job.process.stop()
                done.append(self._finish(job, "timed out"))
        if done:
            self._save()
        return done

    def wait_for_any(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` until some job has ended or passed its timeout (for a loop that has
        nothing else to do). True when `collect_finished()` would now deliver something."""
        limit = time.monotonic() + timeout_s
        while True:
            if self._lost or any(self._is_done(job) for job in self._jobs.values()):
                return True
            if time.monotonic() >= limit:
                return False
            time.sleep(_POLL_S)

    def kill_all(self, reason: str = "Avibe shut down") -> list[FinishedJob]:
        """Stop every running job (whole process groups) and deliver each as killed, with the reason."""
        done = []
        for job in list(self._jobs.values()):
            ended = job.process.stop()
            if ended.code is None:
                done.append(self._finish(job, "killed", reason))
            else:  # it ended by itself just before: report it as it was
                done.append(self._finish(job, "exited", code=ended.code, leftovers=ended.left_running))
        self._save()
        self._drop_empty_logs()
        return done

    def _drop_empty_logs(self) -> None:
        """The temp folder this made for the outputs goes when nothing was put in it (the file tools are
        given it at the start, so every session has one); one with outputs stays: messages name them."""
        if self._made_log_dir and self._log_dir is not None:
            with contextlib.suppress(OSError):
                self._log_dir.rmdir()

    def _is_done(self, job: _Job) -> bool:
        over = job.deadline is not None and time.monotonic() >= job.deadline
        return over or job.process.proc.poll() is not None

    def _finish(
        self, job: _Job, outcome: str, reason: str = "", *, code: int | None = None, leftovers: bool = False
    ) -> FinishedJob:
        del self._jobs[job.info.id]
        ran = time.monotonic() - job.started
        ending = f"exit code {code}" if code is None or code >= 0 else f"killed by signal {-code}"
        head = {
            "exited": f"finished: {ending}",
            "timed out": f"timed out after {ran:.1f} s; its process group was killed",
            "killed": f"was killed ({reason})",
        }[outcome]
        if leftovers:
            head += "; processes it left running were stopped"
        text = f"background command {job.info.id} {head} (ran {ran:.1f} s)\n$ {job.info.command}\n"
        text += self._tail(job.log_path)
        log.info("background %s %s", job.info.id, head)
        return FinishedJob(job.info.id, job.info.command, outcome, code, self._deliver(job.info.id, text))

    def _report_lost(self, job_id: str, job: LostJob) -> FinishedJob:
        command = job.command
        # A sandboxed job died with that process (bwrap --die-with-parent); a full-access one may not have.
        fate = (
            "it was stopped with that process"
            if job.sandboxed
            else f"it may still run as process group {'?' if job.pid is None else job.pid}"
        )
        text = (
            f"background command {job_id} was still running when the previous Avibe process stopped; "
            f"its result is unknown ({fate}). Run it again if it is still needed.\n$ {command}"
        )
        log.warning("background %s lost across a restart: %s", job_id, command)
        return FinishedJob(job_id, command, "lost", None, self._deliver(job_id, text))

    def _tail(self, path: Path) -> str:
        text, size = read_bounded(path, self._tail_chars, tail_only=True)
        if not text.strip():
            return "(no output)"
        where = (
            f"\n(full output, {size} bytes: {path}; read_file reads it)" if size > self._tail_chars else ""
        )
        return f"--- output ---\n{text.rstrip()}{where}"

    def _deliver(self, job_id: str, text: str) -> Entry:
        return self._deliver_input(Source(kind="callback", name="shell", ref=job_id), _storable(text))

    def _save(self) -> None:
        running = {
            job_id: LostJob(job.info.command, job.process.pid, job.process.sandboxed)
            for job_id, job in self._jobs.items()
        }
        self._store.save_state(self._session, STATE_KEY, JobsState(self._next_number, running).to_dict())

    @property
    def log_dir(self) -> Path:
        """The folder of the jobs' output files (made on first use): the file tools read it, since each
        finished job's message names its full output there (the sandboxed shell's /tmp is its own)."""
        return self._logs()

    def _logs(self) -> Path:
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="avibe-bg-"))
            self._made_log_dir = True
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return self._log_dir

    def _now(self) -> datetime:
        return self._clock.now() if self._clock else datetime.now(UTC)
