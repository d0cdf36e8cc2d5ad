"""`/undo` in the chat (docs/chat.md): the last turn's write_file and edit_file changes are reverted from
the snapshots Avibe keeps in its own home, the screen says what in one line, and the agent reads a note
saying so with the next message - a note that starts no turn and is not shown. Textual's headless pilot on
a scripted model, real files, a real SQLite record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, screen_text, status, until
from vibey_doubles import tool_step

from avibe.providers.scripted import reply


def test_undo_reverts_the_last_turns_file_changes_and_tells_the_agent(
    make_chat: Any, home: Path, workdir: Path
) -> None:
    (workdir / "app.py").write_text("VERSION = 1\n")
    steps = [
        tool_step("edit_file", path="app.py", old="VERSION = 1", new="VERSION = 2"),
        tool_step("write_file", path="CHANGES.md", content="bumped\n"),
        reply("Bumped."),
        reply("Back at 1."),
    ]
    app, sessions = make_chat(steps)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None)
            await pilot.press(*"/undo", "enter")
            await until(pilot, lambda: any(n.startswith("nothing to undo") for n in bubbles(app, "notice")))
            await pilot.press(*"Bump the version.", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 1)
            await until(pilot, lambda: "idle" in status(app))
            assert (workdir / "app.py").read_text() == "VERSION = 2\n" and (workdir / "CHANGES.md").exists()
            await pilot.press(*"/undo", "enter")
            await until(pilot, lambda: any(n.startswith("undid") for n in bubbles(app, "notice")))
            (line,) = [n for n in bubbles(app, "notice") if n.startswith("undid")]
            said = "undid the last turn's file changes: restored app.py; removed CHANGES.md"
            assert line == said + " (created in that turn)"
            await pilot.pause(0.5)
            assert "The user ran /undo" not in screen_text(app)  # the note is the model's
            assert len(bubbles(app, "assistant")) == 1  # and starts no turn
            await pilot.press(*"What is the version?", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 2)

    run(scenario)
    assert (workdir / "app.py").read_text() == "VERSION = 1\n" and not (workdir / "CHANGES.md").exists()
    model = sessions.model.inner
    model.assert_consumed()
    last = [m.content for m in model.requests[-1].messages]
    assert any("The user ran /undo: undid the last turn's file changes: restored app.py" in m for m in last)
    assert not any(p.is_relative_to(workdir) for p in home.rglob("*.before"))  # kept in Avibe's home
    assert list((home / "sessions").rglob("*.before"))
