"""Ctrl-C in the chat stops work already running: a real `sleep` in the real shell tool
(bubblewrap) and an external agent's real process (a program in Claude Code's place that ignores SIGTERM
and keeps a child running) are killed - their processes are gone once the screen says the step was
cancelled - the record says which calls did not finish, and the session goes on with the next message."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from chat_doubles import GatedModel, bubbles, run, status, until

from avibe.backends.install import installed_bin
from avibe.cli.chat import VibeCommands, chat_opener
from avibe.config import load_settings
from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery
from avibe.record.messages import ModelReply, ToolCall
from avibe.sources.process import process_alive
from avibe.store import open_store
from avibe.tools.sandbox import bwrap_problem
from avibe.tui.app import ChatApp
from serve_support import pids_running

MODEL = "openai/gpt-4o"
LONG_S = 120  # far longer than any test waits: only a kill ends it in time


_pids_running = pids_running


def _ctrl_c_seen(app: ChatApp) -> bool:
    return any("step cancelled" in line for line in bubbles(app, "notice"))


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot run here")
def test_ctrl_c_kills_a_running_shell_command_and_the_steps_next_call_never_runs(
    make_chat: Any, workdir: Path
) -> None:
    marker = f"{LONG_S}.{os.getpid() % 1000}"  # a `sleep` argument no other process has
    step = ModelReply(
        "",
        tool_calls=[
            ToolCall("call-sleep", "shell", {"command": f"sleep {marker}", "timeout_s": 600}),
            ToolCall("call-write", "write_file", {"path": "after.txt", "content": "never written"}),
        ],
    )
    model = GatedModel([step, reply("Understood, stopped.")], window=8_000, max_output=1_000)
    app, sessions = make_chat(model)
    running: list[int] = []

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await pilot.press(*"Wait a while", "enter")
            await until(pilot, lambda: running.extend(_pids_running(marker)) or running, what="the sleep")
            await pilot.press("ctrl+c")
            await until(pilot, lambda: _ctrl_c_seen(app), what="the step to be cancelled")
            assert not any(process_alive(pid) for pid in running), "the command still runs"
            await until(pilot, lambda: "idle" in status(app))
            app._last_interrupt = 0.0  # as if the person waited: the next Ctrl-C is a first one again
            await pilot.press(*"go on", "enter")
            await until(pilot, lambda: bubbles(app, "assistant")[-1:] == ["vibey› Understood, stopped."])

    run(scenario)
    assert not (workdir / "after.txt").exists()  # the call after the stopped one never ran
    with open_store(sessions.url) as store:
        entries = store.query(EntryQuery(app.session_id))
    assert [e.kind for e in entries] == ["user", "assistant", "harness", "user", "assistant"]
    note = entries[2].text
    assert f"step #{entries[1].seq}" in note and "stopped it" in note
    assert (
        f'shell {{"command": "sleep {marker}"' in note and "stopped by the user (Ctrl-C) while it ran" in note
    )
    assert 'write_file {"path": "after.txt"' in note and "not run" in note
    sent = model.inner.requests[-1].messages
    results = {m.tool_call_id: m.content for m in sent if m.role == "tool"}
    assert results["call-sleep"].startswith("stopped by the user (Ctrl-C)")  # the next turn knows
    assert "not run" in results["call-write"]
    assert any("did not finish" in m.content for m in sent if m.role == "user")  # the note, tagged


FAKE_AGENT = """\
import json, os, signal, subprocess, sys, time
if os.path.exists({pids!r}):  # the next turn: answers at once, with what it was given
    with open({prompt!r}, "w") as out:
        out.write(sys.stdin.read())
    result = {{"type": "result", "subtype": "success", "result": "Going on.", "session_id": "fake-2"}}
    print(json.dumps(result), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a program that does not stop when asked
child = subprocess.Popen(["sleep", "{long}"])
with open({pids!r}, "w") as out:
    out.write(f"{{os.getpid()}} {{child.pid}}")
print(json.dumps({{"type": "system", "subtype": "init", "session_id": "fake-1"}}), flush=True)
time.sleep({long})
"""


def _fake_claude(home: Path, pids: Path, prompt: Path) -> None:
    """A program in Claude Code's place (where `vibe agents install` puts it). Its first turn starts,
    says so, keeps a child running and ignores SIGTERM - the worst case for a stop; its next one answers
    at once and keeps the prompt it was given."""
    folder = installed_bin(home)
    folder.mkdir(parents=True)
    program = folder / "claude"
    script = FAKE_AGENT.format(long=LONG_S, pids=str(pids), prompt=str(prompt))
    program.write_text(f"#!{sys.executable}\n{script}")
    program.chmod(0o755)


def test_ctrl_c_kills_a_running_external_agent_and_its_children(home: Path, workdir: Path) -> None:
    pids, prompt = workdir.parent / "agent.pids", workdir.parent / "prompt.txt"
    _fake_claude(home, pids, prompt)
    settings = load_settings()
    opener = chat_opener(settings, workdir, None, 30)
    app = ChatApp(
        opener, VibeCommands(settings), model=MODEL, session_id=None, workdir=workdir, agent="claude-code"
    )
    running: list[int] = []

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None, what="the session to open")
            await pilot.press(*"Do the long thing", "enter")
            await until(pilot, lambda: pids.exists() and pids.read_text().count(" ") == 1, what="the agent")
            running.extend(int(pid) for pid in pids.read_text().split())
            await pilot.press("ctrl+c")
            await until(pilot, lambda: _ctrl_c_seen(app), timeout=20, what="the agent to be stopped")
            assert not any(process_alive(pid) for pid in running), "the agent or its child still runs"
            await until(pilot, lambda: "idle" in status(app))
            assert not bubbles(app, "error"), bubbles(app, "error")
            app._last_interrupt = 0.0
            await pilot.press(*"go on", "enter")
            await until(pilot, lambda: bubbles(app, "assistant")[-1:] == ["claude-code› Going on."])

    run(scenario)
    with open_store(settings.database_url) as store:
        entries = store.query(EntryQuery(app.session_id or ""))
    assert [e.kind for e in entries] == ["user", "harness", "user", "assistant"]
    assert entries[1].source.name == "claude-code" and "stopped by the user (Ctrl-C)" in entries[1].text
    assert "stopped by the user (Ctrl-C)" in prompt.read_text()  # the next turn knows
