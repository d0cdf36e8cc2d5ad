"""What a hosted session wires in: the host runs the session's feeds, an input of a `--queue`
feed does not start a turn, and the scene's "Waiting for" (S3) names every watch, timer and delegated run
from the harness's own state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from avibe.checkpoint.facts import HarnessFacts, WaitingJob, facts_text
from avibe.compose import open_session
from avibe.config import load_settings
from avibe.host.sessions import session_workdir
from avibe.ingress import deliver
from avibe.record.entries import Source
from avibe.record.feeds import Feed
from avibe.store import open_store
from openai_chat import ChatServer, serve_chat


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


def test_a_hosted_session_names_its_feeds_and_delegations_and_queues_what_it_should(
    tmp_path: Path, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-avibe-test-dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", chat.url)
    env = {
        "AVIBE_HOME": str(tmp_path / "home"),
        "AVIBE_MODEL": "openai/gpt-4o",
        "AVIBE_SANDBOX": "full-access",
    }
    settings = load_settings(env, project_dir=tmp_path, user_config=tmp_path / "none.toml")
    work = tmp_path / "work"
    work.mkdir()
    with open_store(settings.database_url) as store:
        session = store.create_session(title="elsewhere").id
        store.add_feed(
            Feed("t-q", session, "timer", "digest", {"text": "daily digest", "every_s": 3600.0}, wake=False)
        )
        store.add_feed(Feed("w-1", session, "watch", "ci", {"every_s": 300.0, "command": "make ci"}))
    with open_session(
        settings,
        model_name="openai/gpt-4o",
        workdir=work,
        session_id=session,
        window=None,
        max_steps=5,
        start_delegate=lambda child: None,
    ) as live:
        waiting = {line[0]: line[1] for line in live.vibey.waiting_for()}
        assert waiting == {"t-q": "timer digest: every 1h", "w-1": "watch ci: command make ci, every 5m"}
        shown = facts_text(HarnessFacts(tuple(WaitingJob(*line) for line in live.vibey.waiting_for())), 8_192)
        assert "timer digest: every 1h (t-q)" in shown["waiting_for"]  # what it is, not a "background job"
        assert "watch ci: command make ci, every 5m (w-1)" in shown["waiting_for"]
        assert "background job" not in shown["waiting_for"]
        queued = deliver(store := live.store, session, Source("timer", "digest", "t-q"), "daily digest")
        assert not live.host.waiting_input()  # a queued input waits for the next turn
        deliver(store, session, Source("timer", "alarm", "t-other"), "wake up")
        assert live.host.waiting_input()
        assert queued.seq == 1
    with open_store(settings.database_url) as store:
        assert session_workdir(store, session, tmp_path) == work  # saved by the host for any other host
