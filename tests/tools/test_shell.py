"""shell in the foreground: real subprocesses, exit codes, combined output, timeouts that kill the
whole process group. Each test runs in the default sandbox (real bubblewrap) and in full-access: the
sandbox must not change what a command does in its workdir. (Tests never assert durations, only
outcomes.)"""

from __future__ import annotations

from pathlib import Path

from avibe.tools import MAX_OUTPUT_CHARS, Shell
from avibe.tools.sandbox import SandboxPolicy


def test_shell_runs_in_the_workdir_and_reports_exit_code_and_output(
    workdir: Path, policy: SandboxPolicy
) -> None:
    (workdir / "here.txt").write_text("x")
    result = Shell(workdir, sandbox=policy).run({"command": "ls; echo out; echo err >&2"})
    assert not result.is_error
    assert result.output.splitlines() == ["exit code: 0", "here.txt", "out", "err"]


def test_shell_nonzero_exit_is_reported_not_raised(workdir: Path, policy: SandboxPolicy) -> None:
    result = Shell(workdir, sandbox=policy).run({"command": "sh -c 'exit 3'"})
    assert result.output.splitlines() == ["exit code: 3", "(no output)"]


def test_shell_timeout_kills_the_whole_process_group_and_says_so(
    workdir: Path, policy: SandboxPolicy
) -> None:
    marker = workdir / "survived"
    # The child would create the marker after 2 s unless the whole group dies at the 1 s timeout.
    command = f"(sleep 2; touch {marker}) & echo started; wait"
    result = Shell(workdir, sandbox=policy).run({"command": command, "timeout_s": 1})
    assert result.is_error
    assert result.output.startswith("timed out after 1 s")
    assert "started" in result.output
    probe = Shell(workdir, sandbox=policy).run(
        {"command": "sleep 2.5; echo done"}
    )  # outlives the child's deadline
    assert probe.output.endswith("done")
    assert not marker.exists()


def test_processes_left_behind_by_a_finished_command_are_stopped(
    workdir: Path, policy: SandboxPolicy
) -> None:
    marker = workdir / "orphan-ran"
    result = Shell(workdir, sandbox=policy).run(
        {"command": f"(sleep 1; touch {marker}) > /dev/null 2>&1 & echo bye"}
    )
    assert "exit code: 0" in result.output
    assert "processes it left running were stopped" in result.output
    Shell(workdir, sandbox=policy).run({"command": "sleep 1.5"})
    assert not marker.exists()


def test_shell_output_is_bounded_head_and_tail(workdir: Path, policy: SandboxPolicy) -> None:
    result = Shell(workdir, sandbox=policy).run(
        {"command": "echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST"}
    )
    assert len(result.output) < MAX_OUTPUT_CHARS + 300
    assert "FIRST" in result.output and result.output.endswith("LAST")
    assert "[output cut:" in result.output


def test_shell_argument_errors(workdir: Path) -> None:
    shell = Shell(workdir)  # the default sandbox; refused before it would start
    assert "command is empty" in shell.run({"command": "  "}).output
    assert "timeout_s must be between 1 and" in shell.run({"command": "true", "timeout_s": 0}).output
    assert "missing required argument(s) command" in shell.run({}).output
    no_jobs = shell.run({"command": "true", "background": True})
    assert no_jobs.is_error and "background commands are not available here" in no_jobs.output


def test_shell_input_is_closed_so_nothing_waits_for_a_key(workdir: Path, policy: SandboxPolicy) -> None:
    result = Shell(workdir, sandbox=policy).run({"command": "read line; echo got:$?", "timeout_s": 5})
    assert result.output.splitlines() == ["exit code: 0", "got:1"]


def test_a_command_killed_by_a_signal_says_which(workdir: Path, policy: SandboxPolicy) -> None:
    assert (
        Shell(workdir, sandbox=policy)
        .run({"command": "kill -TERM $$"})
        .output.startswith("killed by signal 15")
    )
