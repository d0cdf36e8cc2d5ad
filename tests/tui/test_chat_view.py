"""The chat's view for daily use: it follows the conversation unless the person scrolled up
(then "new messages below"), renders replies as markdown (and /plain shows them as written), titles
sessions by their first message or /rename, keeps each reply under the name of the agent that wrote it
without reprinting the transcript on /model, and shows a write's diff before y / n / a."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from chat_doubles import GatedModel, bubbles, run, status, until
from rich.console import Console
from vibey_doubles import tool_step

from avibe.ingress import deliver, record_reply
from avibe.providers.scripted import reply
from avibe.record.entries import Source
from avibe.store import open_store
from avibe.tui.app import ChatApp
from avibe.tui.widgets import ApprovalBar, Bubble

LONG = "\n".join(f"{n}. step {n} of the plan, written out in full" for n in range(1, 61))
MARKDOWN = (
    "## Part 4\n\nThe plan:\n\n- read the tickets\n- fix the parser\n\n"
    "```python\ndef loud(flag: str) -> str:\n    return flag.replace('--verbose', '--loud')\n```\n"
)


def shown(widget: Any, width: int = 90) -> str:
    """What a widget paints, as plain text (markdown rendered, colours dropped)."""
    console = Console(width=width, color_system=None)
    with console.capture() as captured:
        console.print(widget.content)
    return captured.get()


def _log(app: ChatApp) -> Any:
    return app.query_one("#log")


def _hint_shown(app: ChatApp) -> bool:
    return bool(app.query_one("#below").display)


def test_the_view_follows_a_streamed_reply_taller_than_the_screen_issue_29(make_chat: Any) -> None:
    model = GatedModel([reply(LONG), reply(LONG), reply("short")], window=8_000, max_output=1_000)
    model.gate.clear()
    app, _ = make_chat(model)

    async def scenario() -> None:
        async with app.run_test(size=(80, 20)) as pilot:
            await until(pilot, lambda: app.session_id is not None)
            await pilot.press(*"plan it", "enter")
            await until(pilot, model.waiting.is_set, what="the reply to start")
            model.gate.set()
            await until(pilot, lambda: "idle" in status(app), what="the reply to end")
            await pilot.pause(0.2)
            log = _log(app)
            assert log.max_scroll_y > 0  # taller than the screen
            assert log.scroll_y == log.max_scroll_y, (log.scroll_y, log.max_scroll_y)  # its end is shown
            assert not _hint_shown(app)

            await pilot.press("pageup")  # the person scrolls up to read
            await pilot.pause(0.1)
            assert log.scroll_y < log.max_scroll_y and log.away
            held = log.scroll_y
            await pilot.press(*"again", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 2 and "idle" in status(app))
            await pilot.pause(0.2)
            assert log.scroll_y == held  # the view stays where they read
            assert _hint_shown(app)  # and says there is more below
            assert "new messages below" in str(app.query_one("#below").render())

            for _ in range(40):  # back to the end: following again, the hint gone
                await pilot.press("pagedown")
                if not log.away:
                    break
            await pilot.pause(0.1)
            assert not _hint_shown(app)
            await pilot.press(*"last", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 3 and "idle" in status(app))
            await pilot.pause(0.2)
            assert log.scroll_y == log.max_scroll_y

    run(scenario)


def test_replies_are_rendered_as_markdown_and_plain_shows_them_as_written_issue_29(make_chat: Any) -> None:
    app, _ = make_chat([reply(MARKDOWN)])

    async def scenario() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press(*"show part 4", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") and "idle" in status(app))
            await pilot.pause(0.2)
            (answer,) = (b for b in app.query(Bubble) if b.kind == "assistant")
            rendered = shown(answer)
            assert "Part 4" in rendered and "## Part 4" not in rendered  # a heading, not its source
            assert "• read the tickets" in rendered and "- read the tickets" not in rendered
            assert "def loud(flag: str)" in rendered and "```" not in rendered
            assert rendered.startswith("vibey› ")
            await pilot.press(*"/plain", "enter")
            await pilot.pause(0.1)
            plain = shown(answer)
            assert "## Part 4" in plain and "```python" in plain and "- read the tickets" in plain
            await pilot.press(*"/plain", "enter")
            await pilot.pause(0.1)
            assert "## Part 4" not in shown(answer)

    run(scenario)


def test_sessions_are_titled_by_their_first_message_or_rename_with_agent_and_last_active_issue_29(
    make_chat: Any,
) -> None:
    first = "Fix the login bug on the mobile app: the button does nothing when it is tapped twice in a row"
    app, _ = make_chat([reply("On it.")])

    async def scenario() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press(*first, "enter")
            await until(pilot, lambda: bubbles(app, "assistant") and "idle" in status(app))
            await pilot.press(*"/sessions", "enter")
            await until(pilot, lambda: any(app.session_id in b for b in bubbles(app, "output")))
            listed = bubbles(app, "output")[-1]
            row = next(line for line in listed.splitlines() if app.session_id in line)
            assert row.startswith("*") and "Fix the login bug on the mobile app" in row and "…" in row
            assert re.search(r"  vibey  (just now|\d+ (min|h|days?) ago|\d{4}-\d\d-\d\d)$", row), row
            assert str(app.workdir) not in row  # the folder every session here shares says nothing
            await pilot.press(*"/rename release prep", "enter")
            await until(pilot, lambda: any("titled: release prep" in b for b in bubbles(app, "output")))
            await pilot.press(*"/sessions", "enter")
            await until(pilot, lambda: "release prep  " in bubbles(app, "output")[-1])
            assert not bubbles(app, "error")

    run(scenario)


def test_each_reply_keeps_the_agent_that_wrote_it_and_model_does_not_reprint_issue_29(
    make_chat: Any, home: Path, workdir: Path
) -> None:
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:  # Claude Code worked in it before
        session = store.create_session(str(workdir)).id
        deliver(store, session, Source("user", "kofi"), "what is in notes.txt?")
        record_reply(store, session, "It says: ship on friday.", agent="claude-code")
    app, sessions = make_chat([reply("Vibey here.")] * 3, session_id=session)
    earlier = "claude-code› It says: ship on friday."

    async def scenario() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: bubbles(app, "assistant"), what="the history")
            assert bubbles(app, "assistant")[0] == earlier  # not under the name of who works now
            await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: bubbles(app, "assistant")[-1:] == ["vibey› Vibey here."])
            await until(pilot, lambda: "idle" in status(app))
            before, replies = list(app.query(Bubble)), bubbles(app, "assistant")
            await pilot.press(*"/model openai/gpt-4o-mini", "enter")
            await until(
                pilot, lambda: sessions.opened[-1][1] == "openai/gpt-4o-mini" and "idle" in status(app)
            )
            await until(pilot, lambda: any("gpt-4o-mini" in b for b in bubbles(app, "notice")))
            assert list(app.query(Bubble))[: len(before)] == before  # nothing cleared, nothing reprinted
            assert bubbles(app, "assistant") == replies and replies[0] == earlier
            assert not bubbles(app, "error")

    run(scenario)


def _approve(bar: ApprovalBar) -> None:
    bar.asked_at = time.monotonic() - ApprovalBar.SETTLE_S  # the question has settled


def test_an_approval_shows_the_diff_or_the_new_file_before_y_n_a_issue_29(
    make_chat: Any, workdir: Path
) -> None:
    (workdir / "cli.py").write_text('HELP = "--verbose: say more"\nVERSION = 3\n')
    steps = [
        tool_step("write_file", path="notes/plan.md", content="# Plan\n- one\n- two\n"),
        tool_step("edit_file", path="cli.py", old="--verbose", new="--loud"),
        reply("Done."),
    ]
    app, _ = make_chat(steps, approval="ask")
    asked: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.press(*"plan and rename", "enter")
            for number in (1, 2):
                await until(
                    pilot, lambda n=number: len(asked) < n and app.query(ApprovalBar), what="a question"
                )
                bar = app.query_one(ApprovalBar)
                asked.append(bar.text())
                bar.asked_at = math.inf
                _approve(bar)
                await pilot.press("y")
                await until(pilot, lambda b=bar: not b.is_attached)
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Done."])

    run(scenario)
    new_file, edit = asked
    assert "new file, 3 lines" in new_file and "+# Plan" in new_file and "+- two" in new_file
    assert "chars" not in new_file
    assert '-HELP = "--verbose: say more"' in edit and '+HELP = "--loud: say more"' in edit
    assert "VERSION" in edit  # the context around the change
    assert (workdir / "cli.py").read_text().startswith('HELP = "--loud')
