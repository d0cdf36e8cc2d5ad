"""`vibe serve`: the HTTP API of a host of live sessions (issue 12), an ASGI app served by uvicorn.

    GET  /health                         this host: its sessions, and why a session's host last failed
    GET  /sessions                       every session of the record
    GET  /sessions/{id}/entries?after=N  the record after seq N, each entry with its harness-written tag
    POST /sessions/{id}/messages         the person's message ({"text": ...}); Idempotency-Key honoured;
                                         always needs the serve token, loopback too (see below)
    POST /callbacks/{id}                 a callback's body becomes a tagged input (secret required)
    /inspect                             the inspector, where installed (read-only)

A callback request must carry its secret - `Authorization: Bearer <secret>`, or `X-Avibe-Signature:
sha256=<hex HMAC-SHA256 of the body>` - else 401 and nothing is recorded; a body over the callback's
limit is 413, more requests a minute than it allows 429. `Idempotency-Key` makes a retry record nothing
new (exactly once into the record, whichever host the retry reaches). A request is answered 202 only
once its input is committed. Bound to anything but loopback, every other endpoint needs the serve token
(`Authorization: Bearer <token>`, AVIBE_SERVE_TOKEN).

The person's messages need the token on loopback too (T1: nobody but the user writes the user's words). A
sandboxed shell command shares the host's network, so an agent could otherwise `curl` its own words into
the record as the user's; the token lives in Avibe's home (`serve-token`), which the sandbox hides.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from avibe.errors import AvibeError, UnknownFeed, UnknownSession
from avibe.ingress import IngressError, deliver
from avibe.ports import Clock, FeedStore, RecordStore
from avibe.record.entries import Entry, EntryQuery, Source
from avibe.record.feeds import Feed
from avibe.record.sources import render_entry_text
from avibe.web.fleet import Fleet

log = logging.getLogger("avibe.serve")

MAX_KEY_CHARS: Final = 150
MAX_MESSAGE_BYTES: Final = 1024 * 1024
PAGE: Final = 500
TOKEN_FILE: Final = "serve-token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RateLimit:
    """At most `per_minute` accepted requests per callback in any sliding minute (per host)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str, per_minute: int) -> float:
        """0 when allowed (and counted); else the seconds until it would be."""
        now = self._now()
        with self._lock:
            times = self._seen.setdefault(key, deque())
            while times and now - times[0] >= 60.0:
                times.popleft()
            if len(times) >= per_minute:
                return 60.0 - (now - times[0])
            times.append(now)
            return 0.0


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "kind": entry.kind,
        "name": entry.source.name,
        "ref": entry.source.ref,
        "at": entry.at.isoformat(),
        "text": entry.text,
        "rendered": render_entry_text(entry),  # what an agent sees: the harness's tag line first (T1)
    }


async def _body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is longer than `limit` (read no further than that)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _authorised(request: Request, secret: str, body: bytes) -> bool:
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return hmac.compare_digest(bearer[7:].strip().encode(), secret.encode())
    signature = request.headers.get("x-avibe-signature", "")
    if signature.startswith("sha256="):
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(signature[7:].strip().lower().encode(), expected.encode())
    return False


def _bearer_is(request: Request, token: str) -> bool:
    given = request.headers.get("authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def serve_token_file(home: Path) -> str:
    """The token of this machine's `vibe serve` kept in Avibe's home (made once, owner-only): the person's
    scripts read it there; an agent's sandboxed command cannot (the sandbox hides the home)."""
    path = home / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if not token:
        home.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(24)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(token + "\n")
    return token


def _key(request: Request, scope: str) -> str | JSONResponse:
    key = request.headers.get("idempotency-key", "")
    if len(key) > MAX_KEY_CHARS or not key.isprintable():
        return _error(400, f"Idempotency-Key must be printable and at most {MAX_KEY_CHARS} characters")
    return f"{scope}:{key}" if key else ""


@dataclass
class Api:
    store: RecordStore
    fleet: Fleet
    clock: Clock
    user_name: str
    token: str | None = None  # required on every endpoint but callbacks when set
    limits: RateLimit | None = None
    person_token: str | None = None  # required to post the person's message (the token when set)

    def __post_init__(self) -> None:
        self.limits = self.limits or RateLimit()
        self.person_token = self.token or self.person_token

    def guarded(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            if self.token is not None and not _bearer_is(request, self.token):
                return _error(401, "this host needs its serve token (Authorization: Bearer <token>)")
            try:
                return await endpoint(request)
            except UnknownSession as exc:
                return _error(404, str(exc))
            except AvibeError as exc:
                return _error(503 if "unavailable" in str(exc) else 400, str(exc))

        return run

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {"ok": True, "hosting": self.fleet.hosted(), "failures": dict(self.fleet.failures)}
        )

    async def sessions(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.list_sessions)
        return JSONResponse([{"id": s.id, "title": s.title, "entries": s.entry_count} for s in found])

    async def entries(self, request: Request) -> Response:
        session = request.path_params["session"]
        try:
            after = int(request.query_params.get("after", "0"))
            limit = min(int(request.query_params.get("limit", str(PAGE))), PAGE)
        except ValueError:
            return _error(400, "after and limit must be whole numbers")
        query = EntryQuery(session, seq_from=after + 1, limit=max(limit, 0))
        found = await run_in_threadpool(self.store.query, query)
        return JSONResponse([entry_json(e) for e in found])

    async def message(self, request: Request) -> Response:
        session = request.path_params["session"]
        if self.person_token is None or not _bearer_is(request, self.person_token):
            return _error(
                401,
                "the person's message needs the serve token (Authorization: Bearer <token>; on this "
                "machine it is in Avibe's home, serve-token)",
            )
        body = await _body(request, MAX_MESSAGE_BYTES)
        if body is None:
            return _error(413, f"a message is at most {MAX_MESSAGE_BYTES:,} bytes")
        try:
            text = json.loads(body)["text"]
            if not isinstance(text, str) or not text.strip():
                raise ValueError("empty")
        except (ValueError, KeyError, TypeError):
            return _error(400, 'send JSON {"text": "..."} with the message')
        key = _key(request, f"message:{session}")
        if isinstance(key, JSONResponse):
            return key
        return await self._record(session, Source("user", name=self.user_name), text, key)

    async def callback(self, request: Request) -> Response:
        feed_id = request.path_params["feed"]
        try:
            feed = await run_in_threadpool(self._callback_feed, feed_id)
        except UnknownFeed:
            return _error(404, f"no callback {feed_id!r} on this record")
        body = await _body(request, int(feed.spec["max_bytes"]))
        if body is None:
            return _error(413, f"the body is over this callback's limit of {feed.spec['max_bytes']:,} bytes")
        if not _authorised(request, str(feed.spec["secret"]), body):
            return _error(401, "missing or wrong secret", **{"WWW-Authenticate": 'Bearer realm="avibe"'})
        assert self.limits is not None
        wait = self.limits.allow(feed.id, int(feed.spec["per_minute"]))
        if wait:
            return _error(429, "too many requests for this callback", **{"Retry-After": str(int(wait) + 1)})
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return _error(400, "the body must be UTF-8 text")
        if not text.strip():
            return _error(400, "the body is empty")
        key = _key(request, f"callback:{feed.id}")
        if isinstance(key, JSONResponse):
            return key
        return await self._record(feed.session, Source("callback", name=feed.name, ref=feed.id), text, key)

    def _callback_feed(self, feed_id: str) -> Feed:
        if not isinstance(self.store, FeedStore):
            raise UnknownFeed(feed_id)
        feed = self.store.get_feed(feed_id)
        if feed.kind != "callback" or feed.removed_at is not None:
            raise UnknownFeed(feed_id)
        return feed

    async def _record(self, session: str, source: Source, text: str, key: str) -> Response:
        def work() -> tuple[Entry, bool]:
            before = self.store.get_session(session).entry_count
            entry = deliver(self.store, session, source, text, clock=self.clock, key=key)
            return entry, entry.seq <= before

        try:
            entry, duplicate = await run_in_threadpool(work)
        except IngressError as exc:
            return _error(400, str(exc))
        self.fleet.notify(session)
        return JSONResponse({"session": session, "seq": entry.seq, "duplicate": duplicate}, status_code=202)


def build_app(api: Api, *, extra: list[Mount | Route] | None = None) -> Starlette:
    guard = api.guarded
    routes: list[Route | Mount] = [
        Route("/health", guard(api.health)),
        Route("/sessions", guard(api.sessions)),
        Route("/sessions/{session}/entries", guard(api.entries)),
        Route("/sessions/{session}/messages", guard(api.message), methods=["POST"]),
        Route("/callbacks/{feed}", api.callback, methods=["POST"]),  # its own secret
        *(extra or []),
    ]
    return Starlette(routes=routes)
