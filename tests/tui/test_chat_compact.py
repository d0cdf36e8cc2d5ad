"""`/compact [focus]` in the chat (docs/chat.md): it makes room now through the session's compactor - the
checkpoint by default, its trigger forced - and says so in one line; the focus is recorded as the
person's own `user` entry (T1) that the checkpoint reads as the user's words and keeps verbatim (F5); no
turn starts for it. With nothing to fold it says so. Textual's headless pilot on a scripted model, a real
SQLite record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, status, until
from vibey_doubles import checkpoint_steps

from avibe.agent.compaction.now import ASKED
from avibe.host.context_log import ContextLog, Limits
from avibe.host.events import ModelCalled, ignore_events
from avibe.providers.prices import money, prices_for
from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery
from avibe.store import open_store

FOCUS = "keep the ship date: friday the 13th"


def _notices(app: Any) -> list[str]:
    return [line for line in bubbles(app, "notice")]


def test_compact_with_a_focus_checkpoints_now_and_the_focus_is_the_persons_entry(
    make_chat: Any, workdir: Path
) -> None:
    long = "The plan, step by step: " + "read, change, test, commit; " * 120  # folded, the view shrinks
    steps = [reply(long), reply("Noted the date."), *checkpoint_steps(5), reply("Friday.")]
    app, sessions = make_chat(steps)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None)
            for number, text in enumerate(("Plan: ship the CLI.", "The date is friday."), 1):
                await pilot.press(*text, "enter")
                await until(pilot, lambda n=number: len(bubbles(app, "assistant")) == n)
                await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*f"/compact {FOCUS}", "enter")
            await until(pilot, lambda: any(n.startswith("compacted") for n in _notices(app)), what="the line")
            (line,) = [n for n in _notices(app) if n.startswith("compacted")]
            before, after = (int(n.replace(",", "")) for n in line.split("context ")[1][:-7].split(" → "))
            assert line.startswith("compacted (checkpoint 1): context ") and after < before, line
            assert len(bubbles(app, "assistant")) == 2  # the focus started no turn
            await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"When do we ship?", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 3)

    run(scenario)
    model = sessions.model.inner
    model.assert_consumed()
    asked = model.requests[2]  # the checkpoint's first question: the focus is in its view as the user's
    assert any(m.role == "user" and m.content.endswith(FOCUS) for m in asked.messages)
    last = model.requests[-1]  # the next turn: the recollection, the focus still verbatim, the question
    assert any(m.role == "user" and m.content.endswith(FOCUS) for m in last.messages)
    assert not any(m.content.endswith("Plan: ship the CLI.") for m in last.messages)  # folded
    with open_store(sessions.url) as store:
        (checkpoint,) = store.list_checkpoints(app.session_id)
        assert checkpoint.provenance.trigger == ASKED
        users = store.query(EntryQuery(app.session_id, kinds=frozenset({"user"})))
        assert [e.text for e in users][-2:] == [FOCUS, "When do we ship?"]
        assert users[-2].source.kind == "user"  # the person's entry, through ingress


def test_compact_with_nothing_to_fold_says_so_in_one_line(make_chat: Any, workdir: Path) -> None:
    app, sessions = make_chat([reply("Hello."), *checkpoint_steps(5)])

    def said(start: str) -> list[str]:
        return [n for n in _notices(app) if n.startswith(start)]

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None)
            await pilot.press(*"/compact", "enter")
            await until(pilot, lambda: said("nothing to compact"))
            assert said("nothing to compact") == ["nothing to compact: the conversation is empty"]
            await pilot.press(*"Hi.", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 1)
            await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"/compact", "enter")  # the message folds, the answer stays
            await until(pilot, lambda: said("compacted (checkpoint 1)"))
            await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"/compact", "enter")  # only the newest is left
            await until(pilot, lambda: len(said("nothing to compact")) == 2)
            assert said("nothing to compact")[1].startswith("nothing to compact: only the newest message")

    run(scenario)
    sessions.model.inner.assert_consumed()  # no model call for a compaction that had nothing to fold
    with open_store(sessions.url) as store:
        assert len(store.list_checkpoints(app.session_id)) == 1


def test_the_meter_shows_what_the_sessions_recorded_requests_cost(
    make_chat: Any, home: Path, workdir: Path
) -> None:
    """A resumed session's meter starts from its recorded usage (LiteLLM's prices for the model named
    with each request) and adds this turn's."""

    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        session = store.create_session(str(workdir)).id
        log = ContextLog(store, session, lambda: Limits("openai/gpt-4o", 8_000, 5_976, 7_000), ignore_events)
        log(ModelCalled(1, 500, 12_000, 2_000, 300, 1.0, 0))
        log(ModelCalled(2, 600, 13_000, 12_000, 40, 1.0, 0))
    prices = prices_for("openai/gpt-4o")
    assert prices is not None
    spent = prices.cost(12_000, 2_000, 300) + prices.cost(13_000, 12_000, 40)
    app, _ = make_chat([reply("Hi.")], session_id=session)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id == session)
            await until(pilot, lambda: f"$0 turn · {money(spent)} session" in status(app))

    run(scenario)


def test_compact_uses_the_compaction_the_session_makes_room_with(make_chat: Any, workdir: Path) -> None:
    long = "The plan, step by step: " + "read, change, test, commit; " * 120
    steps = [reply(long), reply("Noted."), reply("Handoff: ship the CLI on friday.")]
    app, sessions = make_chat(steps)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None)
            for number, text in enumerate(("Plan it.", "Ship on friday."), 1):
                await pilot.press(*text, "enter")
                await until(pilot, lambda n=number: len(bubbles(app, "assistant")) == n)
                await until(pilot, lambda: "idle" in status(app))
            await pilot.press(*"/compaction handoff", "enter")
            await until(pilot, lambda: "compaction: handoff" in bubbles(app, "output"))
            await pilot.press(*"/compact", "enter")
            await until(pilot, lambda: any(n.startswith("compacted") for n in _notices(app)))
            (line,) = [n for n in _notices(app) if n.startswith("compacted")]
            assert line.startswith("compacted (handoff): context ")

    run(scenario)
    sessions.model.inner.assert_consumed()  # the handoff summary was the one model call
    with open_store(sessions.url) as store:
        assert store.list_checkpoints(app.session_id) == []
