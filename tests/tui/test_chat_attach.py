"""`vibe chat --session S` while the real `vibe serve` hosts S: the chat attaches as
`vibe run --session` does - it shows the session's history, sends the person's message into the record for
the serving host to answer, shows every input and reply that host records (a message sent from another
terminal too), and never hosts the session itself. The attach view (docs/chat-attach.svg) is made here:
under test-artifacts/chat/, and copied to docs/ with AVIBE_SCREENSHOT_DOCS=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from chat_doubles import bubbles, run, status, until

from avibe.cli.chat import VibeCommands, chat_opener
from avibe.config import load_settings
from avibe.record.entries import EntryQuery
from avibe.store import open_store
from avibe.tui.app import ChatApp
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, hosting, start_serve, stop, vibe, vibe_env, wait_for

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ARTIFACTS = Path(os.environ.get("AVIBE_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "chat"


@dataclass
class Served:
    chat: ChatServer
    env: dict[str, str]
    work: Path
    session: str
    serve: subprocess.Popen[bytes]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """A session whose first turn is answered, with a timer (so `vibe serve` keeps it hosted), and the
    real `vibe serve` hosting it; this process has the same settings (the chat runs in it)."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with serve_chat() as chat:
        env = vibe_env(home, chat)
        chat.say("Ready. I will watch the nightly build.")
        first = vibe(env, work, "run", "--no-wait", "--json", "Watch the nightly build.")
        session = next(json.loads(x)["session"] for x in first.stdout.splitlines() if '"turn_started"' in x)
        vibe(env, work, "timer", "add", "nightly", "--session", session, "--text", "check", "--every", "1h")
        port = free_port()
        serve = start_serve(env, work, port, tmp_path / "serve.log")
        try:
            wait_for(
                lambda: session in hosting(port, home), timeout=30, what="vibe serve to host the session"
            )
            for name, value in env.items():
                if name.startswith(("AVIBE_", "OPENAI_")):
                    monkeypatch.setenv(name, value)
            yield Served(chat, env, work, session, serve)
        finally:
            stop(serve)


def _attached_chat(served: Served) -> ChatApp:
    settings = load_settings()
    opener = chat_opener(settings, served.work, None, 30)
    return ChatApp(opener, VibeCommands(settings), model="openai/gpt-4o", session_id=served.session,
                   workdir=served.work)  # fmt: skip


def test_the_chat_attaches_to_a_session_vibe_serve_hosts_and_shows_what_it_records(served: Served) -> None:
    app = _attached_chat(served)
    served.chat.say("The build is green.")

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id == served.session, what="the session to open")
            notice = next(b for b in bubbles(app, "notice") if "session" in b)
            assert (
                notice.startswith(f"attached to session {served.session}")
                and f"pid {served.serve.pid}" in notice
            )
            assert "you› Watch the nightly build." in bubbles(app)  # its history
            await pilot.press(*"How is the build?", "enter")
            await until(pilot, lambda: "vibey› The build is green." in bubbles(app), timeout=60)
            await until(pilot, lambda: "idle" in status(app))
            served.chat.say("Noted, the release is on friday.")
            sent = vibe(served.env, served.work, "send", "--to", served.session, "Release on friday.")
            assert sent.returncode == 0, sent.stderr
            await until(pilot, lambda: "vibey› Noted, the release is on friday." in bubbles(app), timeout=60)
            assert "you› Release on friday." in bubbles(app)  # sent from another terminal, shown here
            assert bubbles(app).count("you› How is the build?") == 1  # its own message, shown once

    run(scenario)
    with open_store(f"sqlite:///{served.work.parent / 'home' / 'avibe.db'}") as store:
        lease = store.session_lease(served.session)
        assert lease is not None and lease.owner.pid == served.serve.pid  # it never changed hands
    asked = [json.dumps(r["messages"]) for r in served.chat.requests]
    assert any("How is the build?" in body for body in asked)  # vibe serve's Vibey answered it


def test_the_attach_view_screenshot_is_made_from_the_running_chat(served: Served) -> None:
    app = _attached_chat(served)
    app.workdir = Path("~/src/release-queue")  # the notice's folder, the same run after run
    served.chat.say("Still green: 412 tests passed at 09:40. I will tell you when the nightly run starts.")

    async def scenario() -> None:
        async with app.run_test(size=(104, 24)) as pilot:
            await until(pilot, lambda: app.session_id == served.session, what="the session to open")
            await pilot.press(*"Is the build still green?", "enter")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 2, timeout=60)
            await until(pilot, lambda: "idle" in status(app))
            await pilot.pause(0.2)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            app.save_screenshot("chat-attach.svg", str(ARTIFACTS))

    run(scenario)
    made = ARTIFACTS / "chat-attach.svg"
    svg = made.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "attached" in svg and "Still" in svg
    # The notice names this run's session and pid, so docs/ is refreshed only when asked (or missing):
    # a test run must not leave the clone changed.
    if os.environ.get("AVIBE_SCREENSHOT_DOCS") or not (DOCS / "chat-attach.svg").exists():
        shutil.copyfile(made, DOCS / "chat-attach.svg")


def test_when_the_host_goes_away_the_chat_hosts_the_session_and_answers_the_waiting_message(
    served: Served,
) -> None:
    app = _attached_chat(served)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id == served.session, what="the session to open")
            assert any(b.startswith("attached to session") for b in bubbles(app, "notice"))
            stop(served.serve)  # vibe serve ends (its lease released) before the next message
            served.chat.say("Answered here.")
            await pilot.press(*"Still there?", "enter")
            await until(pilot, lambda: "vibey› Answered here." in bubbles(app), timeout=180)
            assert any(b.startswith(f"resumed session {served.session}") for b in bubbles(app, "notice"))
            # The reply shows while it streams and is recorded when the step ends: quitting before that
            # would cancel the step (a person's Ctrl-C), so wait for the record as a person would.
            await until(pilot, lambda: "Answered here." in _texts(served), timeout=60, what="the record")

    run(scenario)
    assert _texts(served)[-2:] == ["Still there?", "Answered here."]  # asked once, answered once


def _texts(served: Served) -> list[str]:
    with open_store(f"sqlite:///{served.work.parent / 'home' / 'avibe.db'}") as store:
        return [e.text for e in store.query(EntryQuery(served.session))]
