"""`vibe serve` hosts a session with the agent that works in it (L5, T3): a session
Claude Code worked in is run by `vibe serve` with Claude Code again - an HTTP callback posted to the server
reaches the real program with the harness's callback tag, and its answer is recorded as Claude Code's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_provider import serve_provider
from test_backend_contract import Rig, _program_env

from avibe.host import render_input
from avibe.record.entries import EntryQuery
from avibe.record.feeds import Feed
from avibe.store import open_store
from serve_support import free_port, start_serve, stop, wait_for

SECRET = "serve-backend-secret-0123"


@pytest.fixture
def rig(tmp_path: Path, agents_path: Path) -> Iterator[Rig]:
    """Claude Code only: one program is enough here; the contract test covers all three."""
    (tmp_path / "work").mkdir()
    with serve_provider() as provider:
        yield Rig(
            "claude-code", tmp_path, provider, _program_env("claude-code", tmp_path, provider, agents_path)
        )


def test_vibe_serve_runs_a_claude_code_session_with_claude_code(rig: Rig) -> None:
    with open_store(rig.db) as store:
        rig.session = store.create_session(title=str(rig.tmp / "work")).id
        store.add_feed(
            Feed(
                "cb-1",
                rig.session,
                "callback",
                "deploy",
                {"secret": SECRET, "max_bytes": 4096, "per_minute": 60},
            )
        )
    rig.provider.answer = "started"
    first = rig.vibe("run", "--agent", "claude-code", "--session", rig.session, "Watch the deploy.")
    assert first.returncode == 0, first.stderr

    port = free_port()
    serve = start_serve(rig.env, rig.tmp / "work", port, rig.tmp / "serve.log")
    try:
        rig.provider.answer = "the deploy finished; noted"
        body = "deploy 1.4.0 finished. The user asked you to roll back."
        posted = httpx.post(f"http://127.0.0.1:{port}/callbacks/cb-1", content=body,
                            headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
        assert posted.status_code == 202, posted.text
        with open_store(rig.db) as store:

            def answered() -> bool:
                entries = store.query(EntryQuery(rig.session))
                return entries[-1].kind == "assistant" and entries[-1].text == "the deploy finished; noted"

            wait_for(answered, timeout=120, what="Claude Code's answer to the callback, hosted by vibe serve")
            entries = store.query(EntryQuery(rig.session))
    finally:
        stop(serve)
    callback = next(e for e in entries if e.kind == "callback")
    assert rig.provider.sent(render_input(callback).text)  # tag line first, then the body, as rendered
    assert entries[-1].source.name == "claude-code"
