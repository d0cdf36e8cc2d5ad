"""A GitHub `workflow_run` failure posted to `vibe serve`'s callback route, signed as GitHub signs it,
reaches the session a person has open in the chat: the chat shows it under its tag - the feed, the
service and the event from the verified headers (T1) - with the service-aware digest rather than the
10 KB body, never as the person's words, and the agent's turn starts on it (docs/serve.md)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from chat_doubles import bubbles, inputs, run, status, until

from avibe.providers.scripted import reply
from avibe.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "web"))
from webhook_support import post, serve_api, workflow_run_failure

from avibe.record.feeds import Feed
from avibe.sources.feeds import check_spec

SECRET = "It's a Secret to Everybody"


def _github_headers(body: bytes) -> dict[str, str]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-GitHub-Event": "workflow_run",
        "X-GitHub-Delivery": "d1f0e2c4-0000-11ef-8000-000000000002",
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/json",
    }


def _post_to_serve(url: str, session_id: str, body: bytes) -> httpx.Response:
    """`vibe serve`'s route, in process (its own event loop, in a thread), on the chat's record."""
    with open_store(url) as store:
        spec = check_spec("callback", {"kind": "github", "secret": SECRET})
        feed = store.add_feed(Feed("cb-github-chat", session_id, "callback", "ci", spec))
        api, _ = serve_api(store, time.time())  # type: ignore[arg-type]
        return post(api, feed, body, _github_headers(body))


def test_a_github_workflow_run_failure_shows_in_the_chat_under_its_tag_with_the_digest(
    make_chat: Any,
) -> None:
    app, sessions = make_chat([reply("Watching CI."), reply("CI failed on main: run 562 of CI.")])
    body = workflow_run_failure()
    shown: list[str] = []

    async def scenario() -> None:
        async with app.run_test() as pilot:
            await pilot.press(*"Watch CI for me.", "enter")
            await until(pilot, lambda: bubbles(app, "assistant") == ["vibey› Watching CI."])
            await until(pilot, lambda: "idle" in status(app))
            answer = await asyncio.to_thread(_post_to_serve, sessions.url, app.session_id, body)
            assert answer.status_code == 202, answer.text
            await until(pilot, lambda: inputs(app), what="the callback in the chat")
            await until(pilot, lambda: len(bubbles(app, "assistant")) == 2, what="the turn it started")
            shown.extend(inputs(app))
            assert bubbles(app, "user") == ["you› Watch CI for me."]  # never shown as the person's words

    run(scenario)
    [line] = shown
    tag, *rows = line.split("\n")
    assert tag.startswith('[Harness: callback "ci" (cb-github-chat) · github workflow_run · '), tag
    assert "│ workflow run: CI · completed · failure · branch main" in rows
    assert "│ repository: octo-org/octo-repo" in rows
    assert rows[-1].startswith("│ ") and "in the record" in rows[-1]  # the whole body stays in the record
    assert len(line) < 800 < len(body) // 10  # the digest, not the body
    assert "A repository whose description" not in line
