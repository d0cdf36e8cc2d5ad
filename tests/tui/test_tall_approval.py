"""Ask mode in the chat, for a command taller than the screen: the whole command is shown, scrollable,
with its line count, and `y` is not taken while part of it was never on the screen - the person scrolls to
the end first (the question line says so). Before, only the head showed, `allow?` was off the screen, and
`y` ran the hidden tail.

Real components: the chat app in Textual's pilot on a small terminal, the scripted model asking for a real
shell command, which runs (or not) in the real sandbox of the workdir.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, until
from vibey_doubles import tool_step

from avibe.providers.scripted import reply
from avibe.tui.widgets import ApprovalBar

# 80 harmless lines, then the tail that matters.
TALL = "\n".join(f"echo step {n}" for n in range(1, 81)) + "\ntouch hidden-tail.txt"


def _settled(bar: ApprovalBar) -> None:
    bar.asked_at = time.monotonic() - ApprovalBar.SETTLE_S  # the question has settled


def test_a_command_taller_than_the_screen_takes_no_yes_until_it_was_all_shown(
    make_chat: Any, workdir: Path
) -> None:
    app, _ = make_chat([tool_step("shell", command=TALL), reply("Done.")], approval="ask")

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(*"tidy up", "enter")
            await until(pilot, lambda: app.query(ApprovalBar), what="the question")
            bar = app.query_one(ApprovalBar)
            await pilot.pause(0.1)
            _settled(bar)
            await pilot.press("y")  # refused: the tail was never on the screen
            await pilot.pause(0.5)
            assert bar.is_attached and not (workdir / "hidden-tail.txt").exists()
            assert "81 lines" in bar.header  # the line count, on the screen above the command
            assert bar.question.plain == TALL  # the whole command, nothing cut
            assert bar.body.max_scroll_y > 0 and bar.hidden_lines() > 0  # taller than its room
            assert "more lines below" in bar.text() and "allow?" not in bar.text()
            await pilot.press("pagedown")
            await pilot.pause(0.1)
            assert bar.is_attached and bar.body.scroll_y > 0  # PageDown reads the question, not the log
            await pilot.press("end")
            await until(pilot, lambda: bar.seen_end, what="the end of the command on the screen")
            assert "allow?" in bar.text()
            await pilot.press("home")  # scrolling back up does not take back what was seen
            await pilot.pause(0.1)
            await pilot.press("y")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Done."], what="the turn's end")

    run(scenario)
    assert (workdir / "hidden-tail.txt").exists()


def test_no_answers_at_once_whatever_is_hidden(make_chat: Any, workdir: Path) -> None:
    app, sessions = make_chat([tool_step("shell", command=TALL), reply("Done.")], approval="ask")

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(*"tidy up", "enter")
            await until(pilot, lambda: app.query(ApprovalBar), what="the question")
            bar = app.query_one(ApprovalBar)
            bar.asked_at = math.inf
            _settled(bar)
            await pilot.press("n")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Done."], what="the turn's end")

    run(scenario)
    assert not (workdir / "hidden-tail.txt").exists()
    told = [m.content for m in sessions.model.inner.requests[-1].messages if m.role == "tool"]
    assert "the person did not approve" in told[-1], told


def test_a_short_command_is_allowed_at_once(make_chat: Any, workdir: Path) -> None:
    app, _ = make_chat([tool_step("shell", command="touch short.txt"), reply("Done.")], approval="ask")

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(*"touch it", "enter")
            await until(pilot, lambda: app.query(ApprovalBar), what="the question")
            bar = app.query_one(ApprovalBar)
            await until(pilot, lambda: bar.seen_end, what="the question laid out")
            assert "1 line" in bar.header and "allow?" in bar.text()
            _settled(bar)
            await pilot.press("y")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Done."], what="the turn's end")

    run(scenario)
    assert (workdir / "short.txt").exists()
