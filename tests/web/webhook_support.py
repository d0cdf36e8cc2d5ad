"""What the webhook tests share: a clock the test sets, a callback feed of a service's kind, and posting
to `vibe serve`'s TCP app in process (httpx's ASGI transport: the same app uvicorn serves)."""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from avibe.record.entries import Entry, EntryQuery
from avibe.record.feeds import Feed
from avibe.store import SqlStore
from avibe.web.callbacks import RateLimit
from avibe.web.fleet import Fleet, SessionHandle
from avibe.web.server import Api, build_tcp_app


class SetClock:
    """This host's clock, set by the test (the services' documented examples are years old)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.at, UTC)


class Woken(Fleet):
    """A fleet that hosts nothing and remembers which sessions an input woke."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store, self._never)
        self.woken: list[str] = []

    @staticmethod
    def _never(session_id: str) -> AbstractContextManager[SessionHandle]:
        raise AssertionError("the API never hosts a session itself")

    def notify(self, session_id: str) -> None:
        self.woken.append(session_id)


def service_feed(store: SqlStore, kind: str, secret: str, name: str = "ci", **spec: Any) -> Feed:
    from avibe.sources.feeds import check_spec

    session = store.create_session().id
    checked = check_spec("callback", {"kind": kind, "secret": secret, **spec})
    return store.add_feed(Feed(f"cb-{kind[:6]}-{session[-6:]}", session, "callback", name, checked))


def serve_api(store: SqlStore, at: float) -> tuple[Api, SetClock]:
    clock = SetClock(at)
    return Api(store, Woken(store), clock, "kofi", token="tok", limits=RateLimit()), clock


def post(api: Api, feed: Feed, body: bytes | str, headers: dict[str, str]) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_tcp_app(api, Path("/nowhere.sock")))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            content = body.encode() if isinstance(body, str) else body
            raw = {name: value.encode() for name, value in headers.items()}  # any bytes a sender may send
            return await client.post(f"/callbacks/{feed.id}", content=content, headers=raw)

    return asyncio.run(send())


def recorded(store: SqlStore, feed: Feed) -> list[Entry]:
    return [e for e in store.query(EntryQuery(feed.session)) if e.kind == "callback"]


def workflow_run_failure() -> bytes:
    """A GitHub `workflow_run` "completed" delivery with conclusion "failure", shaped as GitHub's
    documented payload: the run, its workflow, the repository (with its ~90 fields), the sender."""
    owner = {"login": "octo-org", "id": 6811672, "type": "Organization", "site_admin": False}
    repo_url = "https://api.github.com/repos/octo-org/octo-repo"
    repository = {
        "id": 1296269,
        "name": "octo-repo",
        "full_name": "octo-org/octo-repo",
        "private": False,
        "owner": owner,
        "html_url": "https://github.com/octo-org/octo-repo",
        "description": "A repository whose description, like its many URLs, an agent never needs " * 4,
        **{f"{what}_url": f"{repo_url}/{what}{{/number}}" for what in _REPO_URLS},
        "default_branch": "main",
    }
    run = {
        "id": 30433642,
        "name": "CI",
        "head_branch": "main",
        "head_sha": "acb5820ced9479c074f688cc328bf03f341a511d",
        "run_number": 562,
        "event": "push",
        "status": "completed",
        "conclusion": "failure",
        "workflow_id": 159038,
        "html_url": "https://github.com/octo-org/octo-repo/actions/runs/30433642",
        "created_at": "2026-12-06T16:00:00Z",
        "updated_at": "2026-12-06T16:07:31Z",
        "head_commit": {"id": "acb5820c", "message": "Fix the parser\n\nlong body " * 20},
        "repository": repository,
        "head_repository": repository,
    }
    payload = {
        "action": "completed",
        "workflow_run": run,
        "workflow": {"id": 159038, "name": "CI", "path": ".github/workflows/ci.yml", "state": "active"},
        "repository": repository,
        "organization": owner,
        "sender": {"login": "octocat", "id": 583231, "type": "User"},
    }
    return json.dumps(payload, indent=2).encode()


_REPO_URLS = (
    "archive",
    "assignees",
    "blobs",
    "branches",
    "collaborators",
    "comments",
    "commits",
    "compare",
    "contents",
    "contributors",
    "deployments",
    "downloads",
    "events",
    "forks",
    "git_commits",
    "git_refs",
    "git_tags",
    "hooks",
    "issue_comment",
    "issue_events",
    "issues",
    "keys",
    "labels",
    "languages",
    "merges",
    "milestones",
    "notifications",
    "pulls",
    "releases",
    "stargazers",
    "statuses",
    "subscribers",
    "subscription",
    "tags",
    "teams",
    "trees",
)
