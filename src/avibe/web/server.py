"""`vibe serve`: the HTTP API of a host of live sessions, ASGI apps served by uvicorn - two
of them, one per way in (T1; avibe.web.local says why).

On the local socket (`<Avibe's home>/serve/<port>.sock`, 0600), the person's routes, each with the token:
    GET  /health                         alive; with the token: the sessions hosted, and why a session's
                                         host last failed
    GET  /sessions                       every session of the record
    GET  /sessions/{id}/entries?after=N  the record after seq N, each entry with its harness-written tag
    POST /sessions/{id}/messages         the person's message ({"text": ...}); Idempotency-Key honoured
    POST /callbacks/{id}                 as over TCP
On TCP (127.0.0.1:8765 by default), only what acts for nobody:
    GET  /health                         alive, no more (no token is asked, none is read)
    POST /callbacks/{id}                 a callback's body becomes a tagged input (its own secret)
    /inspect                             the inspector, where installed: GET only, with its own read-only
                                         key (avibe.web.tokens), never the token
    /sessions...                         403, one line naming the socket - a valid token changes nothing

An agent's sandboxed command may share the machine's network: on loopback it is just another local
process, and a token it learned would have let it post its own words as the person's (T1). Over TCP no
route takes the token now. The Host header must name this server (avibe.web.guard): a web page whose
name resolves to 127.0.0.1 gets 421.

A callback of a service's kind (github, gitlab, standard-webhooks, stripe, slack) is checked by that
service's own scheme and recorded once by its delivery id, its tag naming the service and event from the
verified headers (avibe.web.webhooks); a handshake (GitHub's ping, Slack's URL check) is answered 200 and
recorded nowhere. An `avibe` callback request must carry its secret - `Authorization: Bearer <secret>`, or
a signature:
`X-Avibe-Timestamp: <unix seconds>` and `X-Avibe-Signature: sha256=<hex HMAC-SHA256 of
"{timestamp}.{Idempotency-Key}.{body}">` (the key empty when none is sent) - else 401 and nothing is
recorded (avibe.web.callbacks). A signature is good for 5 minutes either side of this host's clock, and
within them it records once: its Idempotency-Key (or, without one, the signature itself) is the delivery
key, and a new key breaks the signature. A body over the callback's limit is 413, more requests a minute
than it allows 429. `Idempotency-Key` makes a retry record nothing new (exactly once into the record,
whichever host the retry reaches). A request is answered 202 only once its input is committed. Client
input is never answered with a 5xx: a body or number of the wrong shape is 400, naming what is wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from avibe.errors import AvibeError, UnknownFeed, UnknownSession
from avibe.ingress import IngressError, new_input
from avibe.ports import Clock, FeedStore, RecordStore
from avibe.record.entries import Entry, EntryQuery, NewEntry, Source
from avibe.record.feeds import Feed
from avibe.record.sources import render_entry_text
from avibe.store.sql import Appended, FeedChanged, SqlStore
from avibe.web.callbacks import CALLBACKS, RateLimit, callback_verdict
from avibe.web.fleet import Fleet
from avibe.web.guard import HostGuard, Hosts
from avibe.web.local import SocketOnly
from avibe.web.tokens import bearer_is, refuse_unauthorised
from avibe.web.webhooks import Refused

log = logging.getLogger("avibe.serve")

MAX_KEY_CHARS: Final = 150
MAX_MESSAGE_BYTES: Final = 1024 * 1024
MAX_SEQ: Final = 2**62  # past any record's size, and below what SQLite's integers hold
PAGE: Final = 500
BATCH: Final = 512  # inputs committed in one transaction at most
WRITER_IDLE_S: Final = (
    2.0  # the ingest writer thread ends after this long without input (made anew on demand)
)
FEED_CACHE: Final = 4096  # callback feeds kept in memory (each checked again in the commit's transaction)


@dataclass
class _Pending:
    entry: NewEntry
    feed: Feed | None
    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[Appended]


class Ingest:
    """The one way a request's input reaches the record: requests queue their inputs here and wait (on the
    event loop, no thread of their own); one writer thread commits whatever is queued in one transaction
    (`SqlStore.append_each`: the delivery keys looked up in it, each callback's feed checked in it), then
    answers every request of the batch at once - after the commit, never before - and wakes each session
    that got input which wakes its agent, once per batch. While it commits, the next batch queues."""

    def __init__(self, store: RecordStore, fleet: Fleet) -> None:
        self.store, self.fleet = store, fleet
        self._queue: list[_Pending] = []
        self._ready = threading.Condition()
        self._running = False
        self._idle = False  # the writer waits for input (it is to be woken)

    async def append(self, entry: NewEntry, feed: Feed | None = None) -> Appended:
        """`entry` committed (or why not); `feed`: the callback feed its request was checked against."""
        loop = asyncio.get_running_loop()
        pending = _Pending(entry, feed, loop, loop.create_future())
        with self._ready:
            self._queue.append(pending)
            if not self._running:
                self._running = True
                threading.Thread(target=self._write, name="serve-ingest", daemon=True).start()
            elif self._idle:  # a writer busy committing takes this input with its next batch unwoken
                self._ready.notify()
        return await asyncio.shield(pending.answer)  # a client that hangs up still gets its input committed

    def _write(self) -> None:
        while True:
            with self._ready:
                if not self._queue:
                    self._idle = True
                    self._ready.wait(WRITER_IDLE_S)
                    self._idle = False
                    if not self._queue:
                        self._running = False
                        return
                batch, self._queue = self._queue[:BATCH], self._queue[BATCH:]
            try:
                outcomes = self._commit(batch)
            except Exception as exc:  # never leave a request waiting: each gets the error
                log.exception("serve: committing %d inputs failed", len(batch))
                outcomes = [Appended(error=exc)] * len(batch)
            waking = {
                p.entry.session
                for p, o in zip(batch, outcomes, strict=True)
                if o.entry is not None and not o.repeat and (p.feed is None or p.feed.wake)
            }
            for session in sorted(waking):  # a queued input (wake=False) waits for the next turn: no one
                self.fleet.notify(session)  # before the answer: a 202 means its session is awake too
            self._answer(batch, outcomes)

    def _commit(self, batch: list[_Pending]) -> list[Appended]:
        if isinstance(self.store, SqlStore):
            feeds = {p.feed.id: p.feed for p in batch if p.feed is not None}
            quiet = [p.feed is not None and not p.feed.wake for p in batch]
            return self.store.append_each([p.entry for p in batch], feeds=feeds, quiet=quiet)
        outcomes: list[Appended] = []
        for p in batch:  # another RecordStore: one append each; a repeat is an entry it numbered before
            try:
                before = self.store.get_session(p.entry.session).entry_count
                entry = self.store.append(p.entry)
                outcomes.append(Appended(entry=entry, repeat=entry.seq <= before))
            except Exception as exc:
                outcomes.append(Appended(error=exc))
        return outcomes

    @staticmethod
    def _answer(batch: list[_Pending], outcomes: list[Appended]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Pending, Appended]]] = {}
        for pending, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(pending.loop, []).append((pending, outcome))
        for loop, answers in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a loop closed: nobody waits there any more
                loop.call_soon_threadsafe(_resolve, answers)


def _resolve(answers: list[tuple[_Pending, Appended]]) -> None:
    for pending, outcome in answers:
        if not pending.answer.done():
            pending.answer.set_result(outcome)


class BadInput(Exception):
    """A client's input of the wrong shape: answered 400 with this message."""


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


def whole_number(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """A query parameter that must be a whole number in [low, high]; BadInput naming it otherwise."""
    text = params.get(name)
    if text is None:
        return default
    text = text.strip()
    if not (text.isascii() and text.lstrip("-").isdigit() and len(text) <= 20):
        raise BadInput(f"{name} must be a whole number from {low} to {high:,}")
    value = int(text)
    if not low <= value <= high:
        raise BadInput(f"{name} must be a whole number from {low} to {high:,}")
    return value


def message_text(body: bytes) -> str:
    """The text of a person's message body, `{"text": "..."}`; BadInput naming what is wrong."""
    try:
        found = json.loads(body)
    except RecursionError:  # nested past the parser's depth: no message is shaped like that
        raise BadInput('the body is not JSON of the form {"text": "..."} (nested too deep)') from None
    except ValueError:  # not JSON, or not UTF-8
        raise BadInput('the body is not JSON of the form {"text": "..."}') from None
    if not isinstance(found, dict):
        raise BadInput(f'the body must be a JSON object {{"text": "..."}}, not {type(found).__name__}')
    text = found.get("text")
    if not isinstance(text, str):
        shown = "missing" if "text" not in found else f"a {type(text).__name__}"
        raise BadInput(f'"text" must be a string with the message; it is {shown}')
    if not text.strip():
        raise BadInput('"text" is empty')
    return text


def _key(request: Request, scope: str) -> str:
    key = request.headers.get("idempotency-key", "")
    if len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise BadInput(f"Idempotency-Key must be printable and at most {MAX_KEY_CHARS} characters")
    return f"{scope}:{key}" if key else ""


@dataclass
class Api:
    store: RecordStore
    fleet: Fleet
    clock: Clock
    user_name: str
    token: str  # required on every endpoint but callbacks and the bare /health, loopback too
    limits: RateLimit = field(default_factory=RateLimit)
    ingest: Ingest = field(init=False)
    # Live callback feeds as last read: a request is checked against its feed here, and the commit checks,
    # in its transaction, that the feed is still that one (else the request is checked again, afresh).
    _feeds: dict[str, Feed] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ingest = Ingest(self.store, self.fleet)

    def guarded(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            if not bearer_is(request, self.token):
                return refuse_unauthorised()
            return await self.answered(endpoint, request)

        return run

    async def answered(
        self, endpoint: Callable[[Request], Awaitable[Response]], request: Request
    ) -> Response:
        """The endpoint's answer; what the client got wrong is a 4xx, never a 500."""
        try:
            return await endpoint(request)
        except BadInput as exc:
            return _error(400, str(exc))
        except (UnknownSession, UnknownFeed) as exc:
            return _error(404, str(exc))
        except AvibeError as exc:
            return _error(503 if "unavailable" in str(exc) else 400, str(exc))

    async def health(self, request: Request) -> Response:
        if not bearer_is(request, self.token):
            return JSONResponse({"ok": True})  # alive; which sessions it hosts is for the token holder
        return JSONResponse(
            {"ok": True, "hosting": self.fleet.hosted(), "failures": dict(self.fleet.failures)}
        )

    async def sessions(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.list_sessions)
        return JSONResponse([{"id": s.id, "title": s.title, "entries": s.entry_count} for s in found])

    async def entries(self, request: Request) -> Response:
        session = request.path_params["session"]
        after = whole_number(request.query_params, "after", 0, 0, MAX_SEQ)
        limit = whole_number(request.query_params, "limit", PAGE, 0, MAX_SEQ)
        query = EntryQuery(session, seq_from=after + 1, limit=min(limit, PAGE))
        found = await run_in_threadpool(self.store.query, query)
        return JSONResponse([entry_json(e) for e in found])

    async def message(self, request: Request) -> Response:
        session = request.path_params["session"]
        body = await _body(request, MAX_MESSAGE_BYTES)
        if body is None:
            return _error(413, f"a message is at most {MAX_MESSAGE_BYTES:,} bytes")
        text = message_text(body)
        key = _key(request, f"message:{session}")
        return await self._record(session, Source("user", name=self.user_name), text, key)

    async def callback(self, request: Request) -> Response:
        return await self.answered(self._callback, request)

    async def _callback(self, request: Request) -> Response:
        feed_id = request.path_params["feed"]
        feed = self._feeds.get(feed_id)
        if feed is None:
            try:
                feed = await self._fresh_feed(feed_id)
            except UnknownFeed:
                return _error(404, f"no callback {feed_id!r} on this record")
        body = await _body(request, int(feed.spec["max_bytes"]))
        if body is None:
            return _error(413, f"the body is over this callback's limit of {feed.spec['max_bytes']:,} bytes")
        answer = await self._callback_with(request, feed, body)
        if not isinstance(answer, FeedChanged):
            return answer
        try:  # stopped, or a new secret or limit since it was read: the request is checked again, afresh
            feed = await self._fresh_feed(feed_id)
        except UnknownFeed:
            return _error(404, f"no callback {feed_id!r} on this record")
        if len(body) > int(feed.spec["max_bytes"]):
            return _error(413, f"the body is over this callback's limit of {feed.spec['max_bytes']:,} bytes")
        answer = await self._callback_with(request, feed, body)
        if isinstance(answer, FeedChanged):  # changed again meanwhile: the sender retries
            return _error(503, "the callback changed while the request was recorded; send it again")
        return answer

    async def _fresh_feed(self, feed_id: str) -> Feed:
        self._feeds.pop(feed_id, None)
        feed = await run_in_threadpool(self._callback_feed, feed_id)
        if len(self._feeds) >= FEED_CACHE:
            self._feeds.clear()
        self._feeds[feed_id] = feed
        return feed

    async def _callback_with(self, request: Request, feed: Feed, body: bytes) -> Response | FeedChanged:
        verdict = callback_verdict(request, feed.spec, body, self.clock.now().timestamp())
        if isinstance(verdict, Refused):
            return _error(401, verdict.reason, **{"WWW-Authenticate": 'Bearer realm="avibe"'})
        wait = self.limits.allow(feed.id, int(feed.spec["per_minute"]))
        if wait:
            return _error(429, "too many requests for this callback", **{"Retry-After": str(int(wait) + 1)})
        if verdict.reply is not None:  # a service's handshake (GitHub's ping, Slack's URL check): no input
            return JSONResponse(verdict.reply)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return _error(400, "the body must be UTF-8 text")
        if not text.strip():
            return _error(400, "the body is empty")
        scope = f"callback:{feed.id}"
        if feed.spec.get("kind", "avibe") == "avibe":
            key = _key(request, scope) or (f"{scope}:{verdict.key}" if verdict.key else "")
        else:  # the service's own delivery id, proven with the request (never a header it does not sign)
            key = f"{scope}:{verdict.key}" if verdict.key else ""
        source = Source("callback", name=feed.name, ref=feed.id, event=verdict.event)
        try:
            return await self._record(feed.session, source, text, key, feed)
        except FeedChanged as exc:
            return exc

    def _callback_feed(self, feed_id: str) -> Feed:
        if not isinstance(self.store, FeedStore) or len(feed_id) > MAX_KEY_CHARS:
            raise UnknownFeed(feed_id)
        feed = self.store.get_feed(feed_id)
        if feed.kind != "callback" or feed.removed_at is not None:
            raise UnknownFeed(feed_id)
        return feed

    async def _record(
        self, session: str, source: Source, text: str, key: str, feed: Feed | None = None
    ) -> Response:
        """Record the input through the ingest writer; 202 once it is committed (FeedChanged: `feed` is
        no longer what the request was checked against)."""
        try:
            entry = new_input(session, source, text, clock=self.clock, key=key)
        except IngressError as exc:
            return _error(400, str(exc))
        outcome = await self.ingest.append(entry, feed)
        if outcome.error is not None:
            if isinstance(outcome.error, ValueError):  # refused as stored: the input's shape
                return _error(400, str(outcome.error))
            raise outcome.error
        assert outcome.entry is not None
        stored = outcome.entry
        return JSONResponse(
            {"session": session, "seq": stored.seq, "duplicate": outcome.repeat}, status_code=202
        )


def build_local_app(api: Api) -> Starlette:
    """The local socket's app: every route, each but callbacks (and a bare /health) with the token. No
    Host check: no browser reaches a Unix socket, so no page can rebind a name to it."""
    guard = api.guarded
    routes: list[Route | Mount] = [
        Route("/health", api.health),  # bare: alive; with the token, what it hosts
        Route("/sessions", guard(api.sessions)),
        Route("/sessions/{session}/entries", guard(api.entries)),
        Route("/sessions/{session}/messages", guard(api.message), methods=["POST"]),
        Route(CALLBACKS + "{feed}", api.callback, methods=["POST"]),  # its own secret
    ]
    return Starlette(routes=routes, middleware=[Middleware(_CallbackPath, api=api)])


def build_tcp_app(
    api: Api, socket: Path, *, inspector: list[Mount] | None = None, hosts: Hosts | None = None
) -> Starlette:
    """The TCP app: signed callbacks, a bare /health and the read-only inspector; the local socket's
    routes answer 403 naming `socket`. `hosts`: the names it answers to (all but callbacks; HostGuard)."""
    routes: list[Route | Mount] = [
        Route("/health", _alive, methods=["GET"]),
        Route(CALLBACKS + "{feed}", api.callback, methods=["POST"]),  # its own secret
        Route("/sessions{rest:path}", SocketOnly(socket)),  # any method: the person's routes
        *(inspector or []),
    ]
    middleware = [Middleware(_CallbackPath, api=api)]
    if hosts is not None:
        middleware.append(Middleware(HostGuard, hosts=hosts, exempt=[CALLBACKS]))
    return Starlette(routes=routes, middleware=middleware)


async def _alive(request: Request) -> Response:
    return JSONResponse({"ok": True})  # which sessions it hosts is asked on the local socket


class _CallbackPath:
    """`POST /callbacks/{feed}` straight to `Api.callback`, past the router and the middleware behind it
    (the ingest hot path; the Host check exempts callbacks anyway); anything else goes on to `app`."""

    def __init__(self, app: ASGIApp, api: Api) -> None:
        self.app, self.api = app, api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].startswith(CALLBACKS):
            feed = scope["path"][len(CALLBACKS) :]
            if feed and "/" not in feed:  # what the route's {feed} matches
                scope["path_params"] = {"feed": feed}
                response = await self.api.callback(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
