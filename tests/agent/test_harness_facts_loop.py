"""S3, S6 through the loop: the scene of a checkpoint names what the harness knows -
the background jobs it waits for, the files read and written, and the last failing call with its error
line verbatim - next to what the model wrote, even when the model wrote "nothing" there.

Driven through Vibey's public surface: a real SQLite record, the real tools over a temp workdir, the strict
scripted model (adaptive: it answers the checkpoint's questions whenever they come).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vibey_doubles import SCENE_ANSWER, answer, tool_step, write_lines

from avibe.providers.scripted import ModelRequest, reply
from avibe.record.messages import ModelReply

JOB = ("bg-7", "./scripts/export_ledger.py --month 2026-03", "/tmp/avibe/logs/bg-7.log")
ERROR = "E4312: checksum mismatch in segment 0x1f2a (expected 0a0b, got 0c0d)"
SILENT_SCENE = {**SCENE_ANSWER, "waiting_for": "none", "exact_references": "none"}


FILLER_READS = [tool_step("read_file", path=f"notes{i}.txt") for i in range(40)]


class Agent:
    """Makes its first moves, then reads filler files until the checkpoint comes; the model's own scene
    says nothing about jobs, files or errors. By default: edits one file, reads a missing one (an error)."""

    def __init__(self, first: list[ModelReply] | None = None) -> None:
        default = [
            tool_step("edit_file", path="app.py", old="value = 0", new="value = 1"),
            tool_step("read_file", path="missing/ledger.cfg"),
        ]
        self.moves: Iterator[ModelReply] = iter([*(default if first is None else first), *FILLER_READS])
        self.checkpointed = False

    def __call__(self, request: ModelRequest) -> ModelReply:
        if request.json_schema is not None:
            self.checkpointed = True
            return answer(request, scene=SILENT_SCENE)
        return reply("done") if self.checkpointed else next(self.moves)


def _run(make_harness: Any, waiting: bool) -> str:
    h = make_harness([Agent()] * 80, max_steps=80)
    (h.workdir / "app.py").write_text("value = 0\n")
    for i in range(40):
        write_lines(h.workdir, f"notes{i}.txt", 40)
    if waiting:
        h.vibey.waiting_for = lambda: [JOB]
    h.send("Set value = 1 in app.py, then read the notes files one by one.")
    stored = h.checkpoints()
    assert stored, "the run made no checkpoint"
    return str(stored[0].scene)


def test_S3_S6_the_scene_names_waiting_jobs_files_and_the_last_failure(make_harness: Any) -> None:
    scene = _run(make_harness, waiting=True)
    waiting = scene.split("Waiting for:", 1)[1].split("Next step:", 1)[0]
    assert "background job bg-7: `./scripts/export_ledger.py --month 2026-03`" in waiting
    assert "log /tmp/avibe/logs/bg-7.log" in waiting
    references = scene.split("Exact references:", 1)[1]
    assert "last failing call: read_file" in references and "missing/ledger.cfg" in references
    assert "modified app.py" in references and "read notes" in references


def test_S3_without_the_harness_facts_the_model_scene_has_no_job(make_harness: Any) -> None:
    """The same run with no waiting jobs wired: the job is nowhere (the facts come only from the harness)."""
    scene = _run(make_harness, waiting=False)
    assert "bg-7" not in scene
    assert "Waiting for: none" in scene


def test_S5_a_shell_exit_code_is_a_failure_with_its_error_line_verbatim() -> None:
    from avibe.checkpoint.facts import failed_call

    output = f"exit code: 2\nimporting dump ...\n{ERROR}\nTraceback (most recent call last):"
    failed = failed_call("shell", {"command": "pkgctl import --fast-resume /data/dump.bin"}, output, False)
    assert failed is not None
    assert failed.arguments == "pkgctl import --fast-resume /data/dump.bin"
    assert failed.error_line == ERROR
    assert failed_call("shell", {"command": "true"}, "exit code: 0\n(no output)", False) is None


def test_S5_the_scene_keeps_the_failed_command_its_error_and_the_command_that_worked(
    make_harness: Any,
) -> None:
    fail = f"echo '{ERROR}' >&2; exit 2"  # the same program fails with an error code, then works
    retries = Agent(
        [
            tool_step("shell", command=f'sh -c "{fail}" importer --fast-resume'),
            tool_step("shell", command="sh -c 'echo imported' importer --verify-each"),
        ]
    )
    h = make_harness([retries] * 80, max_steps=80)
    for i in range(40):
        write_lines(h.workdir, f"notes{i}.txt", 40)
    h.send("Import the dump, then read the notes files one by one.")
    stored = h.checkpoints()
    assert stored, "the run made no checkpoint"
    references = str(stored[0].scene).split("Exact references:", 1)[1]
    failing = references.split("last failing call: shell `", 1)[1]
    assert failing.startswith("sh -c") and "--fast-resume` -> " + ERROR in failing
    assert "; then worked: `sh -c 'echo imported' importer --verify-each`" in failing


def test_a_last_failure_saved_before_then_existed_still_loads() -> None:
    from avibe.agent.state import LiveState

    old = LiveState.from_dict({"last_failure": ["shell", "make", "E1: boom"]})  # three fields
    assert old.last_failure == ("shell", "make", "E1: boom", "")
    new = LiveState(last_failure=("shell", "make", "E1: boom", "make -j1"))
    assert LiveState.from_dict(new.to_dict()).last_failure == new.last_failure
    assert LiveState.from_dict({"last_failure": ["shell", 3]}).last_failure is None  # damaged: dropped
