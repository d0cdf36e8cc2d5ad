"""A GitHub webhook into a live session, end to end (SPEC T1, docs/serve.md): `vibe callback add --kind
github --secret-file F`, the real `vibe serve`, a `workflow_run` failure signed as GitHub signs it and
redelivered once. The session records it once, its agent wakes, and the model is sent the harness's tag
naming the service and event, then the digest - never the 13 KB body, which stays in the record."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from webhook_support import workflow_run_failure

from avibe.record.entries import Entry, EntryQuery
from avibe.store import open_store
from openai_chat import ChatServer, serve_chat
from serve_support import free_port, start_serve, stop, vibe, vibe_env, wait_for

SECRET = "a-github-webhook-secret-of-ours"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with serve_chat() as server:
        server.default = "Noted."
        yield server


def test_a_github_workflow_run_failure_wakes_the_session_under_its_tag_with_the_digest(
    tmp_path: Path, chat: ChatServer
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = vibe_env(home, chat)
    chat.say("Watching CI.")
    first = vibe(env, work, "run", "--no-wait", "--json", "Tell me when CI fails.")
    target = next(
        json.loads(line)["session"] for line in first.stdout.splitlines() if '"turn_started"' in line
    )
    (tmp_path / "secret").write_text(SECRET + "\n")
    port = free_port()
    env["AVIBE_SERVE_URL"] = f"http://127.0.0.1:{port}"
    added = vibe(env, work, "callback", "add", "ci", "--session", target, "--kind", "github",
                 "--secret-file", str(tmp_path / "secret")).stdout  # fmt: skip
    url = next(line.split()[1] for line in added.splitlines() if line.startswith("url:"))
    assert "secret:" not in added and "GitHub: Settings > Webhooks" in added  # the person's own secret

    body = workflow_run_failure()
    headers = {
        "X-GitHub-Event": "workflow_run",
        "X-GitHub-Delivery": "0b989ba4-242f-11e5-81e1-c7b6966d2516",
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    serve = start_serve(env, work, port, tmp_path / "serve.log")
    try:
        chat.say("CI failed on main: run 562 of CI.")
        answers = [httpx.post(url, content=body, headers=headers, timeout=30) for _ in range(2)]
        assert [a.status_code for a in answers] == [202, 202]
        assert [a.json()["duplicate"] for a in answers] == [False, True]  # GitHub's "Redeliver": one entry

        with open_store(f"sqlite:///{home / 'avibe.db'}") as store:

            def replied() -> list[Entry] | None:
                entries = store.query(EntryQuery(target))
                seq = next((e.seq for e in entries if e.kind == "callback"), None)
                after = seq is not None and any(e.kind == "assistant" and e.seq > seq for e in entries)
                return entries if after else None

            entries = wait_for(replied, timeout=90, what="the agent's turn after the callback")
    finally:
        stop(serve)

    [callback] = [e for e in entries if e.kind == "callback"]
    assert callback.text == body.decode() and callback.source.event == "github workflow_run"
    sent = "\n".join(m["content"] or "" for m in chat.requests[-1]["messages"] if m["role"] == "user")
    assert f'[Harness: callback "ci" ({callback.source.ref}) · github workflow_run · ' in sent
    assert "│ workflow run: CI · completed · failure · branch main" in sent
    assert f"all of it is #{callback.seq} in the record" in sent
    assert "A repository whose description" not in sent  # the body stays in the record
