"""At an approval in the chat, r answers no with the person's words ("use pnpm"): the action does not
run, and the words reach the model as the user's own message - recorded through ingress with the user's
source (T1), shown as their bubble - right after the refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, until
from vibey_doubles import tool_step

from avibe.providers.scripted import reply
from avibe.record.entries import EntryQuery
from avibe.store import open_store
from avibe.tui.widgets import ApprovalBar


def test_r_answers_no_with_the_persons_words_which_reach_the_model_as_theirs(
    make_chat: Any, workdir: Path, home: Path
) -> None:
    write = tool_step("write_file", path="package-lock.json", content="{}\n")
    app, sessions = make_chat([write, reply("Using pnpm, then.")], approval="ask")

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await pilot.press(*"Install the dependencies", "enter")
            await until(pilot, lambda: app.query(ApprovalBar), what="the question")
            assert "[r] no, saying what to do instead" in app.query_one(ApprovalBar).text()
            await pilot.pause(ApprovalBar.SETTLE_S)
            await pilot.press("r", *"use pnpm", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Using pnpm, then."])
            assert any("approval: no, saying why" in b for b in bubbles(app, "notice"))
            assert "use pnpm" in bubbles(app, "user")[-1]

    run(scenario)
    assert not (workdir / "package-lock.json").exists()
    messages = sessions.model.inner.requests[-1].messages
    refused = next(m.content for m in messages if m.role == "tool")
    assert "did not approve" in refused and "message #" in refused
    assert (messages[-1].role, messages[-1].content) == ("user", "use pnpm")
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        (session,) = store.list_sessions()
        said = [e for e in store.query(EntryQuery(session.id)) if e.text == "use pnpm"]
    assert len(said) == 1 and said[0].is_user  # one real user entry, by ingress
