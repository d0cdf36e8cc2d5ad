"""A chat session can be found and read afterwards like a `vibe run` session: the chat hosts it through the
product's own opener (`chat_opener`: `open_session`, a hosted model on a loopback OpenAI-compatible
server), and afterwards the record has its context plot (one point per model request), each tool's output
and its failures; the real `vibe log` shows them folded, terminal-safe, with errors marked, and the real
inspector shows them escaped, under the session's title (its first message)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_doubles import bubbles, run, status, until
from starlette.testclient import TestClient

from avibe.cli.chat import VibeCommands, chat_opener
from avibe.config import load_settings
from avibe.host.activity_log import load_activity
from avibe.host.context_log import load_series
from avibe.store import open_store
from avibe.tui.app import ChatApp
from avibe.web.inspector import inspector_app
from openai_chat import ChatServer, serve_chat
from serve_support import VIBE, vibe_env

ESC = "\x1b"
# What the agent's command prints: markup a page would run, a terminal escape that would paint the screen
# red and one that would set the window title, then enough lines to fold.
PRINTS = "<script>window.pwned=1</script>\n\x1b[31mred\x1b[0m\n\x1b]0;owned\x07\n" + "".join(
    f"row {i}\n" for i in range(12)
)
ASKED = "Show me what print.sh prints, then read missing.txt."


def _chat(work: Path) -> ChatApp:
    settings = load_settings()
    opener = chat_opener(settings, work, None, 30)
    return ChatApp(opener, VibeCommands(settings), model="openai/gpt-4o", session_id=None, workdir=work)


def _talk(chat: ChatServer, work: Path) -> str:
    chat.call("shell", command="sh print.sh")
    chat.call("read_file", path="missing.txt")
    chat.say("Printed it; missing.txt does not exist.")
    app = _chat(work)

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.session_id is not None, timeout=120)  # litellm loads first
            await pilot.press(*ASKED, "enter")
            await until(pilot, lambda: any("does not exist" in b for b in bubbles(app, "assistant")), 60)
            await until(pilot, lambda: "idle" in status(app))

    run(scenario)
    assert app.session_id is not None
    return app.session_id


@pytest.fixture(scope="module")
def chatted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path, int]]:
    """One chat, read by every test here (it takes a while: the chat loads litellm first)."""
    root = tmp_path_factory.mktemp("findable")
    work, home = root / "work", root / "home"
    work.mkdir()
    (work / "out.txt").write_text(PRINTS)
    (work / "print.sh").write_text("cat out.txt\n")
    with serve_chat() as chat, pytest.MonkeyPatch.context() as monkeypatch:
        env = vibe_env(home, chat)
        for name in list(os.environ):
            if name.startswith(("AVIBE_", "OPENAI_")) and name not in env:
                monkeypatch.delenv(name)  # the chat reads exactly what `vibe` would be given
        for name, value in env.items():
            if name.startswith(("AVIBE_", "OPENAI_")):
                monkeypatch.setenv(name, value)
        session = _talk(chat, work)
        yield session, env, work, len(chat.requests)


def test_a_chat_session_keeps_its_context_plot_and_its_tool_outputs(
    chatted: tuple[str, dict[str, str], Path, int],
) -> None:
    session, _, _, requests = chatted
    with open_store(load_settings().database_url, read_only=True) as store:
        series = load_series(store, session)
        assert len(series.points) == requests == 3  # the chat's model requests are on the plot
        assert series.limits.model == "openai/gpt-4o" and series.limits.window > 0
        kept = [item for items in load_activity(store, session).values() for item in items]
    assert [(i.name, i.error) for i in kept] == [("shell", False), ("read_file", True)]
    assert PRINTS.rstrip("\n") in kept[0].output  # kept as the command printed it


def test_vibe_log_shows_the_chats_tool_output_folded_inert_and_its_error_marked(
    chatted: tuple[str, dict[str, str], Path, int],
) -> None:
    session, env, work, _ = chatted
    done = subprocess.run([*VIBE, "log", "--session", session], env=env, cwd=work, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert ESC not in shown and "\x07" not in shown  # the escapes are written out, not obeyed
    assert "│    \\x1b[31mred\\x1b[0m" in shown and "\\x1b]0;owned\\x07" in shown
    assert "│    <script>window.pwned=1</script>" in shown  # a terminal shows markup as text
    assert "│    row 0\n" in shown and "row 1\n" not in shown  # folded: the first five lines
    assert "... 11 more lines (--full shows them)" in shown
    assert "│ x error: read_file failed" in shown
    whole = subprocess.run([*VIBE, "log", "--session", session, "--full"], env=env, cwd=work,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "│    row 11" in whole.stdout and ESC not in whole.stdout
    as_json = subprocess.run([*VIBE, "log", "--session", session, "--json"], env=env, cwd=work,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    rows = json.loads(as_json.stdout)
    outputs = [a for row in rows for a in row["activity"]]
    assert [(a["name"], a["error"]) for a in outputs] == [("shell", False), ("read_file", True)]
    assert PRINTS.rstrip("\n") in outputs[0]["output"] and rows[0]["source_event"] == ""


def test_the_inspector_titles_the_chat_and_shows_its_output_escaped(
    chatted: tuple[str, dict[str, str], Path, int],
) -> None:
    session, _, _, _ = chatted
    with open_store(load_settings().database_url, read_only=True) as store:
        client = TestClient(inspector_app(store))  # the inspector's app as `vibe inspect` serves it
        listed = client.get("/").text
        page = client.get(f"/s/{session}/timeline").text
    assert ASKED in listed  # the first message is the session's title, not the folder
    assert "<script>window" not in page and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert page.count("<details>") == 1 and "11 more lines" in page  # the short error needs no folding
    assert 'class="happened failed"' in page and "read_file failed" in page
