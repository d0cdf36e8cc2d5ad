"""`vibe agents`, `vibe run --agent` refusals, and the process runner's failures:
a missing program says how to install it and writes nothing; a crash carries its exit code and last
stderr lines; silence is a timeout; a wrapper's child holding the pipe does not keep a turn waiting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import avibe.backends
from avibe.backends import BACKENDS, BackendFailed, BackendTimedOut, ToolDone, ToolUse, run_program
from avibe.backends.base import Launch, Outcome
from avibe.backends.claude_code import ClaudeReader
from avibe.backends.codex import CodexReader

PINNED = json.loads((Path(avibe.backends.__file__).parent / "npm" / "package.json").read_text())[
    "dependencies"
]


def _vibe(home: Path, *args: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")}
    env |= {"AVIBE_HOME": str(home), "PATH": path}
    command = [sys.executable, "-c", "from avibe.cli import main; main()", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=home.parent)


@pytest.mark.parametrize("agent", ["claude-code", "codex", "opencode"])
def test_a_missing_program_says_how_to_install_it_and_writes_nothing(tmp_path: Path, agent: str) -> None:
    done = _vibe(tmp_path / "home", "run", "--agent", agent, "hello")
    assert done.returncode == 2
    assert "is not installed: run `vibe agents install`" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "home" / "avibe.db").exists()


def test_an_unknown_agent_and_vibey_options_are_refused(tmp_path: Path) -> None:
    unknown = _vibe(tmp_path / "home", "run", "--agent", "gpt-pilot", "hello")
    assert unknown.returncode == 2 and "no agent backend is called 'gpt-pilot'" in unknown.stderr
    model = _vibe(tmp_path / "home", "run", "--agent", "codex", "--model", "openai/gpt-4o", "hello")
    assert model.returncode == 2 and "codex uses the model configured for it" in model.stderr


def test_vibe_agents_lists_what_is_found_with_versions(tmp_path: Path, agents_home: Path) -> None:
    installed = _vibe(agents_home, "agents")
    assert installed.returncode == 0, installed.stderr
    lines = {line.split()[0]: line for line in installed.stdout.splitlines()}
    for backend in BACKENDS:
        line = lines[backend.name]
        assert PINNED[backend.package] in line and "(avibe)" in line, line
    on_path = _vibe(
        tmp_path / "home", "agents", path=f"{agents_home / 'agents/node_modules/.bin'}:/usr/bin:/bin"
    )
    assert all("(PATH)" in line for line in on_path.stdout.splitlines()), on_path.stdout
    nothing = _vibe(tmp_path / "home", "agents")
    assert nothing.stdout.count("not found (vibe agents install)") == 3


@dataclass(frozen=True)
class Shell:
    """A stand-in program for the runner's own failure paths: /bin/sh running `script`."""

    script: str
    name: str = "sh-agent"
    label: str = "Shell agent"
    program: str = "sh"
    package: str = "-"

    def launch(self, prompt: str, session: str, workdir: Path) -> Launch:
        return Launch(("-c", self.script), prompt)

    def reader(self, session: str) -> CodexReader:
        return CodexReader(session)

    def auth_hint(self) -> str:
        return "Set SH_KEY."


def _run(script: str, tmp_path: Path, timeout_s: float = 30) -> Outcome:
    return run_program(
        Shell(script), Path("/bin/sh"), "prompt", session="", workdir=tmp_path, timeout_s=timeout_s
    )


def test_a_crash_carries_its_exit_code_and_last_stderr_lines(tmp_path: Path) -> None:
    script = 'for i in $(seq 1 30); do echo "line $i" >&2; done; echo "401 Unauthorized" >&2; exit 3'
    with pytest.raises(BackendFailed) as failed:
        _run(script, tmp_path)
    text = str(failed.value)
    assert failed.value.exit_code == 3 and "Shell agent exited with code 3." in text
    assert "line 30" in text and "line 10" not in text  # the last lines only
    assert text.endswith("Set SH_KEY.")  # a key problem says what to set


def test_silence_is_a_timeout_even_when_the_program_started_children(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BackendTimedOut, match="said nothing for 1 seconds"):
        _run("sleep 60 & sleep 60", tmp_path, timeout_s=1)
    assert time.monotonic() - started < 10


def test_a_wrapper_that_exits_is_not_waited_for_through_its_child(tmp_path: Path) -> None:
    """Like Codex's node wrapper killed with -9: its native child holds stdout open; the turn ends."""
    started = time.monotonic()
    with pytest.raises(BackendFailed, match="exited with code 7"):
        _run("sleep 60 & exit 7", tmp_path)
    assert time.monotonic() - started < 10


def test_a_turn_reads_the_program_events(tmp_path: Path) -> None:
    lines = [
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "ls"}},
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "ls",
                "aggregated_output": "a\n",
                "exit_code": 0,
            },
        },
        {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "done"}},
        {"type": "turn.completed"},
    ]
    script = "cat > /dev/null; " + "; ".join(f"printf '%s\\n' '{json.dumps(line)}'" for line in lines)
    seen: list[object] = []
    outcome = run_program(
        Shell(script), Path("/bin/sh"), "p", session="", workdir=tmp_path, on_activity=seen.append
    )
    assert outcome == Outcome("done", "t-1", (ToolUse("i1", "command_execution", {"command": "ls"}),))
    assert seen == [
        ToolUse("i1", "command_execution", {"command": "ls"}),
        ToolDone("i1", "command_execution", False, 2),
    ]


def test_a_reported_error_is_a_failure_not_a_reply() -> None:
    claude = ClaudeReader("s")
    claude.feed({"type": "result", "subtype": "success", "is_error": True, "result": "Invalid API key"})
    with pytest.raises(BackendFailed, match="Invalid API key"):
        claude.outcome()
    codex = CodexReader("t")
    codex.feed({"type": "turn.failed", "error": {"message": "unexpected status 401"}})
    with pytest.raises(BackendFailed, match="401"):
        codex.outcome()
