"""The input keeps the keys (docs/chat.md): Tab completes a slash command's name and never moves the
focus; a click on a tool line (which focuses it) hands the focus back to the input, so what the person
types next lands there. Textual's headless pilot on a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, until
from hypothesis import given
from hypothesis import strategies as st

from avibe.providers.scripted import reply
from avibe.record.messages import ToolCall
from avibe.tui.commands import NAMES, complete
from avibe.tui.widgets import ChatInput, ToolLine


def test_complete_fills_in_one_name_and_agrees_as_far_as_several_do() -> None:
    assert complete("/se") == ("/sessions ", ("sessions",))
    assert complete("/r") == ("/re", ("rename", "resume"))
    assert complete("/re") == ("/re", ("rename", "resume"))
    assert complete("/zz") == ("/zz", ())
    assert complete("hello /se") == ("hello /se", ()) and complete("/log --gr") == ("/log --gr", ())


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", max_size=6))
def test_a_completion_only_extends_what_was_typed_toward_a_name(typed: str) -> None:
    text, fits = complete(f"/{typed}")
    assert text.startswith(f"/{typed}")
    assert all(name.startswith(text[1:].strip()) for name in fits)
    assert set(fits) == {name for name in NAMES if name.startswith(typed)}


def test_tab_completes_in_the_input_and_the_focus_stays_there(make_chat: Any, workdir: Path) -> None:
    (workdir / "notes.txt").write_text("ship on friday\n")
    read = ToolCall("call-1", "read_file", {"path": "notes.txt"})
    app, _ = make_chat([reply(tool_calls=[read]), reply("Friday.")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            field = app.query_one(ChatInput)
            await pilot.press(*"Read notes.txt", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Friday."])
            await pilot.press(*"/se", "tab")
            assert field.text == "/sessions " and app.focused is field
            await pilot.press("tab", "tab")
            assert app.focused is field and field.text == "/sessions "
            (line,) = app.query(ToolLine)
            await pilot.click(ToolLine)  # expands it, and focused its title before
            await pilot.pause()
            assert not line.collapsed and app.focused is field
            await pilot.press(*"x")
            assert field.text == "/sessions x"

    run(scenario)
