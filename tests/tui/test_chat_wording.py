"""No spec ids on screen: what the chat shows (its help, notices, the status bar), every `vibe`
command's --help, and the inspector's pages say things in words. Ids such as U3, L5, V7, F1, M4 belong
in code and tests; a person reading the screen does not know them."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chat_doubles import bubbles, run, status, until
from starlette.testclient import TestClient
from typer.main import get_command
from typer.testing import CliRunner

from avibe.cli import app as cli_app
from avibe.ingress import deliver, record_reply
from avibe.ports import StoredCheckpoint
from avibe.providers.scripted import reply
from avibe.record.checkpoint import Provenance
from avibe.record.entries import Source
from avibe.store import open_store
from avibe.web.inspector import inspector_app

SPEC_ID = re.compile(r"\b[A-Z]\d{1,2}\b")
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
STATIC = Path(__file__).resolve().parents[2] / "src" / "avibe" / "web" / "inspector" / "static"


def spec_ids(text: str) -> list[str]:
    """Each spec-like id in `text`, with the words around it (to say where)."""
    return [text[max(0, m.start() - 50) : m.end() + 10].replace("\n", " ") for m in SPEC_ID.finditer(text)]


def test_the_chat_help_and_notices_name_no_spec_ids(make_chat: Any) -> None:
    app, _ = make_chat([reply("Done.")])
    seen: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") and "idle" in status(app))
            for command in ("/help", "/agent", "/model", "/sessions", "/bogus"):
                await pilot.press(*command, "enter")
                await pilot.pause(0.3)
            await until(pilot, lambda: len(bubbles(app, "output")) >= 3, what="the commands' output")
            seen.extend([*bubbles(app), status(app)])

    run(scenario)
    assert any("/new" in line and "/resume" in line for line in seen)  # the help was shown
    found = [hit for line in seen for hit in spec_ids(line)]
    assert not found, found


def _helps(command: Any, path: list[str]) -> list[tuple[str, str]]:
    out = CliRunner().invoke(cli_app, [*path, "--help"], env={"COLUMNS": "200"}).output
    pages = [(" ".join(["vibe", *path]), out)]
    for name, sub in getattr(command, "commands", {}).items():  # a group (typer's own click)
        pages += _helps(sub, [*path, name])
    return pages


def test_every_vibe_help_page_names_no_spec_ids() -> None:
    pages = _helps(get_command(cli_app), [])
    assert len(pages) > 20 and any("chat" in text for _, text in pages)
    found = [(where, hit) for where, text in pages for hit in spec_ids(text)]
    assert not found, found


def _words(page: str) -> str:
    """A page's text as a reader sees it: no tags, scripts or styles; entities decoded."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_inspector_pages_name_no_spec_ids(home: Path) -> None:
    with open_store(f"sqlite:///{home / 'avibe.db'}") as store:
        session = store.create_session("release").id
        deliver(store, session, Source("user", "kofi"), "go through the tickets", at=T0)
        record_reply(store, session, "on it", at=T0)
        problems = ("'## Goals' is missing mission M2 (M4)", "V2: a heading is missing")  # as logged
        repaired = Provenance(trigger="91%", calls=6, problems=problems, repair_used=True)
        plan = "model-free move-out (V7): 4 oldest messages (900 of 5000 tokens) moved out"
        moved = Provenance(trigger="97%", calls=4, fallback="model-free", plan=plan, problems=problems)
        partial = Provenance(trigger="95%", calls=4, fallback="partial", plan="the older half")
        for number, provenance in enumerate((repaired, moved, partial)):
            checkpoint = StoredCheckpoint(
                session, number, T0, "## Goals\n", (), "scene", 1, provenance=provenance
            )
            store.save_checkpoint(checkpoint)
        client = TestClient(inspector_app(store))
        urls = ["/", f"/s/{session}/timeline", f"/s/{session}/checkpoints", f"/s/{session}/context"]
        urls += [f"/s/{session}/checkpoints/{n}" for n in (1, 2, 3)]
        pages = {url: client.get(url) for url in urls}
    assert all(page.status_code == 200 for page in pages.values()), {
        u: p.status_code for u, p in pages.items()
    }
    texts = {url: _words(page.text).replace("mission M2", "mission") for url, page in pages.items()}
    assert "4 oldest messages" in texts[f"/s/{session}/checkpoints/2"]  # M2 above: a mission's own id
    found = [(url, hit) for url, text in texts.items() for hit in spec_ids(text)]
    labels = re.findall(r'label: "([^"]*)"', (STATIC / "inspector.js").read_text(encoding="utf-8"))
    found += [("inspector.js", hit) for label in labels for hit in spec_ids(label)]
    assert labels and not found, found
