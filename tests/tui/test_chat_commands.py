"""Each slash command of the chat: /new (the one a U3 stop names), /sessions, /resume, /model,
/log (vibe log's own filters, A4), /checkpoints (list, one whole, the diff of two minds), /skills, /help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, status, until
from vibey_doubles import BEFORE_STEPS, checkpoint_steps, tool_step, write_lines

from avibe.providers.scripted import reply
from avibe.store import open_store
from avibe.tui.commands import NAMES


async def _say(pilot: Any, app: Any, text: str) -> None:
    """Send `text` and wait until the turn it starts has ended."""
    replies = len(bubbles(app, "assistant"))
    await pilot.press(*text, "enter")
    await until(pilot, lambda: len(bubbles(app, "assistant")) > replies, what=f"the reply to {text!r}")
    await until(pilot, lambda: "idle" in status(app))


async def _command(pilot: Any, app: Any, text: str, kind: str = "output") -> str:
    """Run a slash command; what it printed (its output or error line). A command that switches the
    session (kind "switch") clears the screen: the caller waits for the session."""
    before = len(bubbles(app, kind))
    app.query_one("#input").insert(text)
    await pilot.press("enter")
    if kind == "switch":
        return ""
    await until(pilot, lambda: len(bubbles(app, kind)) > before, what=f"{text}'s {kind}")
    return bubbles(app, kind)[-1]


def test_help_lists_every_command(make_chat: Any) -> None:
    app, _ = make_chat([])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            shown = await _command(pilot, app, "/help")
            for name in NAMES[:-1]:  # /exit is /quit's other name
                assert f"/{name}" in shown
            assert "unknown command /nope" in await _command(pilot, app, "/nope", "error")

    run(scenario)


def test_new_starts_a_session_and_resume_and_sessions_go_back(make_chat: Any) -> None:
    app, sessions = make_chat([reply("First."), reply("Second."), reply("First again.")])
    ids: list[str] = []

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await _say(pilot, app, "Session one")
            ids.append(app.session_id)
            await _command(pilot, app, "/new", "switch")
            await until(pilot, lambda: app.session_id not in (None, ids[0]), what="a new session")
            ids.append(app.session_id)
            assert bubbles(app, "user") == []  # a fresh screen
            await _say(pilot, app, "Session two")
            listed = await _command(pilot, app, "/sessions")
            assert ids[0] in listed and ids[1] in listed
            await _command(pilot, app, "/resume", "switch")  # the latest other one of this folder
            await until(pilot, lambda: app.session_id == ids[0], what="session one again")
            await until(pilot, lambda: "you› Session one" in bubbles(app, "user"))
            await _say(pilot, app, "Back in one")
            await _command(pilot, app, f"/resume {ids[1][:14]}", "switch")
            await until(pilot, lambda: app.session_id == ids[1])
            await until(pilot, lambda: "you› Session two" in bubbles(app, "user"))
            assert "no such session" in await _command(pilot, app, "/resume nosuch", "error")

    run(scenario)
    assert sessions.opened == [(None, "openai/gpt-4o"), (None, "openai/gpt-4o"),
                               (ids[0], "openai/gpt-4o"), (ids[1], "openai/gpt-4o")]  # fmt: skip
    with open_store(sessions.url) as store:
        assert {s.id for s in store.list_sessions()} == set(ids)


def test_model_shows_the_model_and_switches_it_in_the_same_session(make_chat: Any) -> None:
    app, sessions = make_chat([reply("On the first."), reply("On the second.")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await _say(pilot, app, "hello")
            session = app.session_id
            shown = await _command(pilot, app, "/model")
            assert "openai/gpt-4o" in shown and "128,000" in shown  # vibe models' facts
            refused = await _command(pilot, app, "/model anthropic/claude-sonnet-4-5", "error")
            assert "ANTHROPIC_API_KEY" in refused  # checked before anything changes
            await _command(pilot, app, "/model openai/gpt-4o-mini", "switch")
            await until(pilot, lambda: "openai/gpt-4o-mini" in status(app) and app.session_id == session)
            await until(pilot, lambda: "you› hello" in bubbles(app, "user"))  # the same conversation
            await _say(pilot, app, "still there?")

    run(scenario)
    assert sessions.opened[-1][1] == "openai/gpt-4o-mini" and sessions.opened[-1][0] is not None


def test_log_searches_this_sessions_record_with_vibe_logs_filters_A4(make_chat: Any) -> None:
    app, _ = make_chat([reply("Noted the deploy."), reply("Noted the lunch.")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await _say(pilot, app, "Deploy on friday")
            await _say(pilot, app, "Lunch at noon")
            found = await _command(pilot, app, '/log --grep "deploy"')
            assert "Deploy on friday" in found and "Noted the deploy." in found and "Lunch" not in found
            mine = await _command(pilot, app, "/log --user")
            assert "Deploy on friday" in mine and "Lunch at noon" in mine and "Noted" not in mine
            assert "#2" in await _command(pilot, app, "/log --from-seq 2 --to-seq 2")
            bad = await _command(pilot, app, "/log --kind nosuch")
            assert bad.startswith("vibe: unknown kind 'nosuch'")  # vibe log's own error line

    run(scenario)


def test_checkpoints_lists_shows_and_diffs_them(make_chat: Any, workdir: Path) -> None:
    steps = [*BEFORE_STEPS, tool_step("read_file", path="c.txt"), *checkpoint_steps(5), reply("c read")]
    app, _ = make_chat(steps)
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(workdir, name, lines)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None)
            assert "(no checkpoints in this session)" in await _command(pilot, app, "/checkpoints")
            for text in ("Read a.txt.", "Now read b.txt.", "Now read c.txt."):
                await _say(pilot, app, text)
            listed = await _command(pilot, app, "/checkpoints")
            assert listed.startswith("#1") and "upto #" in listed
            whole = await _command(pilot, app, "/checkpoints --show 1")
            for part in ("## Mind", "## Memo", "## Scene", "Work through the ticket queue oldest first"):
                assert part in whole
            assert "the minds are identical" in await _command(pilot, app, "/checkpoints --diff 1 1")
            assert "no checkpoint 2" in await _command(pilot, app, "/checkpoints --show 2")
            _a_later_mind(app.session_id or "", "- [N9] Decided: ship on friday, not monday")
            diff = await _command(pilot, app, "/checkpoints --diff 1 2")
            assert "+- [N9] Decided: ship on friday, not monday" in diff, diff

    run(scenario)


def _a_later_mind(session: str, line: str) -> None:
    """A second checkpoint in the chat's record: the first one's parts, its mind with one line more."""
    import os
    from dataclasses import replace

    with open_store(f"sqlite:///{Path(os.environ['AVIBE_HOME']) / 'avibe.db'}") as store:
        first = store.list_checkpoints(session)[0]
        store.save_checkpoint(replace(first, mind=first.mind.rstrip("\n") + "\n" + line + "\n"))


def test_skills_lists_the_projects_skills(make_chat: Any, workdir: Path) -> None:
    skill = workdir / ".avibe" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: release\ndescription: Cut a release step by step\n---\n# release\n")
    app, _ = make_chat([])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            shown = await _command(pilot, app, "/skills")
            assert "release" in shown and "Cut a release step by step" in shown

    run(scenario)
