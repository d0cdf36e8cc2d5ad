"""The chat on a scripted model through Textual's headless pilot: replies stream onto the screen while the
model writes them, tool calls are one line each that expands to arguments and output, errors are shown,
the input keeps multi-line text and a history."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from chat_doubles import GatedModel, bubbles, run, status, until

from avibe.errors import ModelError
from avibe.providers.scripted import reply
from avibe.record.messages import ToolCall
from avibe.tui.widgets import ChatInput, ToolLine

ANSWER = "The notes say we ship on friday, after the last review of the release."


def test_a_reply_streams_onto_the_screen_before_the_model_has_finished(make_chat: Any) -> None:
    model = GatedModel([reply(ANSWER)], window=8_000, max_output=1_000)
    model.gate.clear()  # the pieces after the first wait until the test lets them go
    app, _ = make_chat(model)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None, what="the session to open")
            await pilot.press(*"When do we ship?", "enter")
            await until(pilot, model.waiting.is_set, what="the first piece")
            await until(pilot, lambda: bubbles(app, "assistant"), what="the reply to start")
            partial = bubbles(app, "assistant")[0]
            assert partial.startswith("vibey› The") and partial != "vibey› " + ANSWER
            assert "working" in status(app)
            model.gate.set()
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› " + ANSWER])
            await until(pilot, lambda: "idle" in status(app))
            assert bubbles(app, "user") == ["you› When do we ship?"]

    run(scenario)


def test_a_tool_call_is_one_line_that_expands_to_its_arguments_and_output(
    make_chat: Any, workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("ship on friday\n")
    read = ToolCall("call-1", "read_file", {"path": "notes.txt"})
    app, _ = make_chat([reply(tool_calls=[read]), reply("Friday.")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await pilot.press(*"Read notes.txt", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Friday."])
            (line,) = app.query(ToolLine)
            assert line.collapsed and "read_file" in str(line.title) and "notes.txt" in str(line.title)
            assert "ship on friday" in str(line.output.render())
            assert '"path": "notes.txt"' in str(line.args.render())
            line.collapsed = False
            await pilot.pause()
            assert line.output.display

    run(scenario)


def test_a_model_failure_is_shown_not_swallowed(make_chat: Any) -> None:
    app, _ = make_chat([ModelError("the provider is down (503)")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: bubbles(app, "error"), what="the error")
            assert "the provider is down (503)" in bubbles(app, "error")[0]

    run(scenario)


def test_the_input_takes_several_lines_and_walks_the_history(make_chat: Any) -> None:
    app, sessions = make_chat([reply("one"), reply("two")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            box = app.query_one(ChatInput)
            await pilot.press(*"first line", "ctrl+j", *"second line", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› one"])
            assert bubbles(app, "user") == ["you› first line\nsecond line"]
            box.insert("pasted\ntext with\nthree lines")
            await pilot.press("enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 2)
            assert box.text == ""
            await pilot.press("up")
            assert box.text == "pasted\ntext with\nthree lines"
            box.move_cursor((0, 0))
            await pilot.press("up")
            assert box.text == "first line\nsecond line"
            box.move_cursor(box.document.end)
            await pilot.press("down")
            assert box.text == "pasted\ntext with\nthree lines"

    run(scenario)
    users = [m.content for m in sessions.model.inner.requests[-1].messages if m.role == "user"]
    assert users[-2:] == ["first line\nsecond line", "pasted\ntext with\nthree lines"]


def _vibe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVIBE_")}
    env |= {"AVIBE_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-avibe-test-dummy"}
    command = [sys.executable, "-c", "from avibe.cli import main; main()", *args]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_vibe_alone_without_a_terminal_prints_the_help_and_chat_says_it_needs_one(tmp_path: Path) -> None:
    alone = _vibe(tmp_path)
    assert alone.returncode == 0 and "chat" in alone.stdout and "run" in alone.stdout
    chat = _vibe(tmp_path, "chat", "--model", "openai/gpt-4o")
    assert chat.returncode == 2 and chat.stderr.startswith("vibe: ") and "needs a terminal" in chat.stderr
    assert not (tmp_path / "home" / "avibe.db").exists()  # nothing written
