"""Background shell commands: their completion arrives later as a tagged callback input carrying the
command's id (SPEC S3, T1, N7), handed to the Delivery port (here the real ingress into the real
record). Each test runs in the default sandbox (real bubblewrap) and in full-access."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from avibe.ports import Delivery, RecordStore
from avibe.record.entries import EntryQuery
from avibe.record.sources import render_entry_text
from avibe.sources.background import BackgroundJobs
from avibe.tools import Shell
from avibe.tools.sandbox import SandboxPolicy


@pytest.fixture
def jobs(
    delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy, tmp_path: Path
) -> Iterator[BackgroundJobs]:
    manager = BackgroundJobs(delivery, store, session_id, policy, log_dir=tmp_path / "bg-logs")
    yield manager
    manager.kill_all("test ended")


def _running(marker: str) -> bool:
    """True while a `sleep` whose argument holds `marker` runs (zombies are gone)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            if argv[0] == b"sleep" and marker.encode() in argv[1] and "Z" not in _state(cmdline.parent):
                return True
        except OSError:
            continue
    return False


def _state(proc_dir: Path) -> str:
    return proc_dir.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]


def _eventually(check: Callable[[], bool], within_s: float = 10.0) -> bool:
    """Wait for observable state (a killed process takes a moment to go), bounded."""
    end = time.monotonic() + within_s
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _callbacks(store: RecordStore, session_id: str) -> list[str]:
    entries = store.query(EntryQuery(session=session_id, kinds=frozenset({"callback"})))
    return [render_entry_text(e) for e in entries]


def test_S3_background_command_returns_its_id_and_completion_arrives_as_a_callback(
    jobs: BackgroundJobs, store: RecordStore, session_id: str, workdir: Path, policy: SandboxPolicy
) -> None:
    shell = Shell(workdir, jobs, sandbox=policy)
    started = shell.run({"command": "echo hello; sleep 0.2; exit 3", "background": True})
    assert not started.is_error
    assert started.output.startswith("started bg-1 in the background")
    assert [j.id for j in jobs.running()] == ["bg-1"]  # the scene's "waiting for" (S3)
    assert jobs.wait_for_any(30)
    finished = jobs.collect_finished()
    assert [(f.id, f.outcome, f.exit_code) for f in finished] == [("bg-1", "exited", 3)]
    entry = finished[0].entry
    assert (entry.kind, entry.source.name, entry.source.ref) == ("callback", "shell", "bg-1")
    assert not entry.is_user  # N7: a callback never counts as the user's words
    assert "background command bg-1 finished: exit code 3" in entry.text
    assert "hello" in entry.text
    shown = _callbacks(store, session_id)
    assert len(shown) == 1 and shown[0].startswith('[Harness: callback "shell" (bg-1)')
    assert jobs.running() == [] and jobs.collect_finished() == []


def test_ids_are_never_reused_across_a_restart_and_lost_jobs_are_reported(
    jobs: BackgroundJobs,
    delivery: Delivery,
    store: RecordStore,
    session_id: str,
    policy: SandboxPolicy,
    tmp_path: Path,
) -> None:
    first = jobs.start("sleep 30")
    restarted = BackgroundJobs(delivery, store, session_id, policy, log_dir=tmp_path / "bg-logs-2")
    lost = restarted.collect_finished()
    assert [(f.id, f.outcome) for f in lost] == [(first.id, "lost")]
    assert "result is unknown" in lost[0].entry.text
    assert restarted.start("true").id == "bg-2"
    restarted.kill_all()


def test_a_background_timeout_kills_the_group_and_is_delivered(jobs: BackgroundJobs) -> None:
    job = jobs.start("sleep 30.0411", timeout_s=1)
    assert _eventually(lambda: _running("30.0411"))
    assert jobs.wait_for_any(30)
    finished = jobs.collect_finished()
    assert [(f.id, f.outcome, f.exit_code) for f in finished] == [(job.id, "timed out", None)]
    assert "its process group was killed" in finished[0].entry.text
    assert not _running("30.0411")  # gone by the time the callback is delivered


def test_kill_all_stops_running_jobs_and_records_why(
    jobs: BackgroundJobs, store: RecordStore, session_id: str
) -> None:
    job = jobs.start("sleep 30.0412 & setsid sleep 30.0413 & sleep 30.0414; wait")
    assert _eventually(lambda: all(_running(f"30.041{n}") for n in (2, 3, 4)))
    killed = jobs.kill_all("Avibe shut down")
    assert [(f.id, f.outcome) for f in killed] == [(job.id, "killed")]
    # setsid left the process group: the sandbox's PID namespace (or, in full-access, the run's mark)
    # still finds it
    assert _eventually(lambda: not any(_running(f"30.041{n}") for n in (2, 3, 4)), within_s=2)
    assert "was killed (Avibe shut down)" in _callbacks(store, session_id)[-1]
    assert jobs.running() == []


def test_too_many_background_commands_is_an_error_the_model_can_act_on(
    delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy, tmp_path: Path
) -> None:
    jobs = BackgroundJobs(delivery, store, session_id, policy, log_dir=tmp_path / "logs", max_running=1)
    shell = Shell(policy.workdir, jobs, sandbox=policy)
    assert not shell.run({"command": "sleep 30", "background": True}).is_error
    refused = shell.run({"command": "sleep 30", "background": True})
    assert refused.is_error and "already run (bg-1)" in refused.output
    jobs.kill_all()


def test_binary_output_is_stored_safely_and_tail_is_bounded(
    delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy, tmp_path: Path
) -> None:
    jobs = BackgroundJobs(delivery, store, session_id, policy, log_dir=tmp_path / "logs", tail_chars=100)
    jobs.start("head -c 5000 /dev/zero | tr '\\0' y; printf 'a\\0b'; echo END")
    assert jobs.wait_for_any(30)
    entry = jobs.collect_finished()[0].entry
    assert "\x00" not in entry.text
    assert "a\\0bEND" in entry.text  # the NUL byte shown as \0
    assert entry.text.rstrip().splitlines()[-1].startswith("(full output, 5007 bytes")
    assert "[output cut: " in entry.text and entry.text.count("y") < 200  # only the tail is kept


def test_the_full_output_a_finished_job_names_can_be_read_with_read_file(
    delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy
) -> None:
    """The callback says where the whole output is; the agent's own read_file can open it there (the
    sandboxed shell's /tmp is private, so a path outside the workdir would be a dead end)."""
    from avibe.record.messages import ToolCall
    from avibe.tools import ToolBox, default_tools

    jobs = BackgroundJobs(delivery, store, session_id, policy, tail_chars=100)  # its own temp folder
    tools = ToolBox(
        default_tools(policy.workdir, store=store, session_id=session_id, jobs=jobs, sandbox=policy)
    )
    started = tools.dispatch(
        ToolCall("c1", "shell", {"command": "seq 1 2000; echo LAST", "background": True})
    )
    assert not started.is_error, started.output
    assert jobs.wait_for_any(30)
    text = jobs.collect_finished()[0].entry.text
    where = text.rstrip().splitlines()[-1]
    assert where.startswith("(full output, ") and where.endswith("; read_file reads it)")
    path = where.split(" bytes: ", 1)[1].removesuffix("; read_file reads it)")
    read = tools.dispatch(ToolCall("c2", "read_file", {"path": path}))
    assert not read.is_error, read.output
    assert read.output.startswith("     1\t1\n") and "of 2001" in read.output  # from its first line
    shutil.rmtree(jobs.log_dir)


def test_an_unused_output_folder_goes_at_shutdown_and_a_used_one_stays(
    delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy
) -> None:
    idle = BackgroundJobs(delivery, store, session_id, policy)
    unused = idle.log_dir
    idle.kill_all()
    assert not unused.exists()
    busy = BackgroundJobs(delivery, store, session_id, policy)
    busy.start("echo hi")
    assert busy.wait_for_any(30)
    busy.kill_all()
    assert sorted(p.suffix for p in busy.log_dir.iterdir()) == [".log", ".report"]
    shutil.rmtree(busy.log_dir)


def test_waiting_gives_up_at_its_timeout_while_the_job_runs(jobs: BackgroundJobs) -> None:
    jobs.start("sleep 30")
    assert jobs.wait_for_any(0.2) is False
    assert jobs.collect_finished() == [] and [j.id for j in jobs.running()] == ["bg-1"]


def test_processes_a_finished_background_command_left_behind_are_stopped(jobs: BackgroundJobs) -> None:
    jobs.start("sleep 30.0415 > /dev/null 2>&1 & setsid sleep 30.0416 & echo parent done")
    assert jobs.wait_for_any(30)
    finished = jobs.collect_finished()[0]
    assert finished.exit_code == 0
    assert "processes it left running were stopped" in finished.entry.text
    assert "parent done" in finished.entry.text
    assert _eventually(lambda: not _running("30.0415") and not _running("30.0416"), within_s=2)


def test_a_lost_job_says_whether_it_can_still_run(
    jobs: BackgroundJobs, delivery: Delivery, store: RecordStore, session_id: str, policy: SandboxPolicy
) -> None:
    job = jobs.start("sleep 30")
    pid = jobs._jobs[job.id].process.pid
    lost = BackgroundJobs(delivery, store, session_id, policy).collect_finished()
    # bwrap --die-with-parent: a sandboxed job died with the Avibe process that started it
    expected = "it was stopped with that process" if policy.sandboxed else f"process group {pid}"
    assert expected in lost[0].entry.text


def test_a_background_command_killed_by_a_signal_says_which(jobs: BackgroundJobs) -> None:
    jobs.start("kill -TERM $$")
    assert jobs.wait_for_any(30)
    finished = jobs.collect_finished()[0]
    assert finished.exit_code == -15 and "finished: killed by signal 15" in finished.entry.text


def test_S3_a_running_job_is_named_with_its_log_and_its_newest_line_of_output(
    jobs: BackgroundJobs, workdir: Path, policy: SandboxPolicy
) -> None:
    shell = Shell(workdir, jobs, sandbox=policy)
    command = "echo 'exporting 2026-05'; echo; echo 'writing /srv/exports/ledger-1234.parquet'; sleep 30"
    assert not shell.run({"command": command, "background": True}).is_error
    assert _eventually(lambda: jobs.waiting()[0][3].startswith("writing"))
    ((job_id, shown, log, latest),) = jobs.waiting()
    assert (job_id, shown) == ("bg-1", command) and Path(log).name == "bg-1.log"
    assert latest == "writing /srv/exports/ledger-1234.parquet"  # the newest non-blank line, verbatim
    Path(log).write_text("x" * 50_000 + "\nstill at segment 0x0200\n  \n")  # a long log: its tail is read
    assert jobs.waiting()[0][3] == "still at segment 0x0200"
    Path(log).write_text("y" * 50_000)  # one endless line: a bounded piece of it
    assert jobs.waiting()[0][3] == "y" * len(jobs.waiting()[0][3]) and 0 < len(jobs.waiting()[0][3]) <= 400
