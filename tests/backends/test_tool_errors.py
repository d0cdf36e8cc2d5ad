"""An external agent's failed tool says why (SPEC L5): the real Claude Code, Codex and
OpenCode from npm, on the scripted provider, each make a tool call that fails - Claude Code and OpenCode
refuse it (a path outside the workdir, a permission the user never gave), Codex runs it and it exits 1 -
and the reason their own stream carried is in `vibe run --json`'s tool_result (`error`), on `vibe run`'s
`[tool] ... failed` line (one line, behind the frame mark), and on the chat's tool line. Lines recorded
from the same programs check each reader's reason without npm."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_provider import ToolCall, serve_provider
from test_backend_contract import Rig, _program_env

from avibe.backends import BACKENDS, ToolDone
from avibe.cli.chat import VibeCommands, chat_opener
from avibe.config import load_settings
from avibe.record.sources import FRAME
from avibe.store import open_store
from avibe.tui.app import ChatApp
from avibe.tui.widgets import ToolLine

# Each program's failing call, what it calls the tool, and words of the reason its stream gives.
FAILING = {
    "claude-code": (ToolCall("Bash", {"command": "cat /no/such/file-xyz", "description": "cat"}), "Bash",
                    "was blocked"),
    "codex": (ToolCall("exec_command", {"cmd": "cat /no/such/file-xyz"}), "command_execution",
              "exit code 1: cat: /no/such/file-xyz: No such file or directory"),
    "opencode": (ToolCall("bash", {"command": "cat /no/such/file-xyz", "description": "cat"}), "bash",
                 "rejected permission"),
}  # fmt: skip


# Lines the three programs wrote (recorded from the versions the lockfile pins; ids and noise cut), and
# the one-line reason each failed call gets.
RECORDED = [
    ("claude-code", [
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                                       "input": {"command": "cat nope.txt"}}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "is_error": True,
            "content": "Exit code 1\ncat: nope.txt: No such file or directory", "tool_use_id": "toolu_1"}]}},
    ], "exit code 1: cat: nope.txt: No such file or directory"),
    ("claude-code", [
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                                       "input": {"file_path": "/x"}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "is_error": True, "tool_use_id":
            "toolu_1", "content": "<tool_use_error>File does not exist.</tool_use_error>"}]}},
    ], "File does not exist."),
    ("codex", [
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command":
            "/bin/bash -lc 'cat /no/such/file-xyz'", "aggregated_output":
            "cat: /no/such/file-xyz: No such file or directory\n", "exit_code": 1, "status": "failed"}},
    ], "exit code 1: cat: /no/such/file-xyz: No such file or directory"),
    ("opencode", [
        {"type": "tool_use", "sessionID": "s1", "part": {"type": "tool", "tool": "bash", "callID": "c1",
            "state": {"status": "error", "input": {"command": "cat /no/such/file-xyz"},
                      "error": "The user rejected permission to use this specific tool call."}}},
    ], "The user rejected permission to use this specific tool call."),
    ("opencode", [
        {"type": "tool_use", "sessionID": "s1", "part": {"type": "tool", "tool": "bash", "callID": "c1",
            "state": {"status": "completed", "input": {"command": "cat nope.txt"},
                      "output": "cat: nope.txt: No such file or directory\n",
                      "metadata": {"output": "cat: nope.txt: No such file or directory\n", "exit": 1}}}},
    ], "exit code 1: cat: nope.txt: No such file or directory"),
]  # fmt: skip


@pytest.mark.parametrize(("agent", "lines", "reason"), RECORDED)
def test_each_program_s_stream_gives_the_reason(agent: str, lines: list[dict[str, Any]], reason: str) -> None:
    reader = next(b for b in BACKENDS if b.name == agent).reader("")
    done = [a for line in lines for a in reader.feed(line) if isinstance(a, ToolDone)]
    assert [(d.is_error, d.reason) for d in done] == [(True, reason)]


@pytest.fixture(params=sorted(FAILING))
def rig(request: pytest.FixtureRequest, tmp_path: Path, agents_path: Path) -> Iterator[Rig]:
    (tmp_path / "work").mkdir()
    with serve_provider() as provider:
        env = _program_env(request.param, tmp_path, provider, agents_path)
        yield Rig(request.param, tmp_path, provider, env)


@pytest.mark.slow
def test_a_failed_tool_of_an_external_agent_says_why(rig: Rig) -> None:  # L5
    call, name, reason = FAILING[rig.agent]
    with open_store(rig.db) as store:
        rig.session = store.create_session(title=str(rig.tmp / "work")).id
    rig.provider.tool_calls.append(call)
    rig.provider.answer = "it did not work"
    done = rig.vibe("run", "--agent", rig.agent, "--session", rig.session, "--json", "show me the file")
    assert done.returncode == 0, done.stderr + done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines()]
    results = [e for e in events if e["kind"] == "tool_result"]
    assert [(e["name"], e["is_error"]) for e in results] == [(name, True)], events
    assert reason in results[0]["error"] and "\n" not in results[0]["error"], results[0]

    rig.provider.tool_calls.append(call)  # the same failure, shown as `vibe run` prints it
    shown = rig.vibe("run", "--session", rig.session, "try again")
    assert shown.returncode == 0, shown.stderr + shown.stdout
    failed = [line for line in shown.stdout.splitlines() if line.startswith(f"[tool] {name} failed")]
    assert len(failed) == 1, shown.stdout
    assert failed[0].startswith(f"[tool] {name} failed {FRAME} ") and reason in failed[0], failed[0]


@pytest.mark.slow
def test_the_chat_shows_why_an_external_agents_tool_failed(
    tmp_path: Path, agents_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # L5, through the real chat (Textual's pilot) with the real Claude Code
    (tmp_path / "work").mkdir()
    with serve_provider() as provider:
        rig = Rig(
            "claude-code", tmp_path, provider, _program_env("claude-code", tmp_path, provider, agents_path)
        )
        for variable in [
            n for n in os.environ if n.startswith(("AVIBE_", "ANTHROPIC_", "OPENAI_", "CODEX_"))
        ]:
            monkeypatch.delenv(variable)
        for variable, value in rig.env.items():
            monkeypatch.setenv(variable, value)
        provider.tool_calls.append(FAILING["claude-code"][0])
        settings = load_settings()
        app = ChatApp(
            chat_opener(settings, tmp_path / "work", None, 30), VibeCommands(settings),
            model=settings.model, session_id=None, workdir=tmp_path / "work", agent="claude-code",
        )  # fmt: skip

        def failed_lines() -> list[str]:
            return [str(line.title) for line in app.query(ToolLine) if line.has_class("failed")]

        async def chat() -> list[str]:
            async with app.run_test() as pilot:
                await _until(pilot, lambda: app.session_id is not None, "the session to open")
                await pilot.press(*"show me the file", "enter")
                await _until(pilot, failed_lines, "the failed tool line")
                shown = failed_lines()
                await app.action_quit()
                return shown

        [title] = asyncio.run(chat())
    assert title.startswith("✗ Bash ") and f" {FRAME} " in title and "was blocked" in title, title


async def _until(pilot: Any, check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.1)
