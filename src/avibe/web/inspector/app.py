"""The inspector's ASGI app: server-rendered pages (Jinja2), a small script, a vendored chart library.

    GET /                                  sessions: agent, model, size, checkpoints, last activity; ?q=
    GET /s/{id}                            -> the session's timeline
    GET /s/{id}/timeline?after=N&...       one page of the record; filters as `vibe log` (kind, user,
                                           from, to, since, until, grep)
    GET /s/{id}/stream?after=N&...         server-sent events: each new entry (the same filters), as HTML
    GET /s/{id}/context                    the context over time (the plot); /context.json its data
    GET /s/{id}/checkpoints                the session's checkpoints; /checkpoints/{n} one of them
    GET /eval                              an eval results folder's report (`vibe inspect --eval DIR`)
    GET /static/...                        the script, the style sheet, the vendored uPlot

Read-only: every route is a GET, the store is only read. With a key (`vibe serve` and `vibe inspect`
always give one, loopback too: an agent's sandboxed command is a local process), every request needs it:
`Authorization: Bearer <key>`, or `?key=<key>` once (it is then kept in an HttpOnly, SameSite=Strict
cookie). The key is a read-only capability of its own, never the serve token (avibe.web.tokens): a
browser sends the cookie to every port of the host (RFC 6265 8.5), so a dev server the agent runs on
another port of 127.0.0.1 may see it - it reads the pages, and can post nothing anywhere. Under `vibe
serve` the cookie's path is /inspect, so it only goes with requests for that path. Every response carries
a strict Content-Security-Policy (the page's own script and style files only, never framed); a file of an
eval folder gets one that forbids script altogether and sandboxes it (an SVG can hold a script). Live
updates poll the record for entries after the last seq, so they work whichever process writes.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import jinja2
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from avibe.errors import AvibeError, UnknownSession
from avibe.ports import RecordStore
from avibe.providers.prices import money
from avibe.tui.sessions import shorten
from avibe.web.guard import FILE_CSP, HostGuard, Hosts, SecurityHeaders
from avibe.web.inspector import pages
from avibe.web.inspector.evals import EvalFolder
from avibe.web.inspector.filters import BadFilter, Filters, parse_filters

HERE: Final = Path(__file__).parent
COOKIE: Final = "avibe_inspect"
POLL_S: Final = 0.2  # live updates: how often the record is asked for new entries
HEARTBEAT_S: Final = 15.0
TITLE_SHOWN: Final = 80  # a session's title on a page: one line; the whole title is its tooltip
MAX_SEQ: Final = 2**62  # past any record's size, and below what SQLite's integers hold


def exact(text: str) -> Markup:
    """Text for a `<pre>`, byte for byte once parsed: HTML-escaped, and a carriage return written as a
    character reference (the parser would turn a raw CR LF into LF)."""
    return Markup(str(escape(text)).replace("\r", "&#13;"))


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # the templates ship with the package: never re-stat them per include
    )
    env.filters["exact"] = exact
    env.filters["when"] = pages.when
    env.filters["words"] = pages.words
    env.filters["money"] = money
    env.filters["short"] = lambda text: shorten(text, TITLE_SHOWN)
    env.globals["kinds"] = pages.kinds()
    return env


def cookie_name(scope: Scope) -> str:
    """The key's cookie, one per port: browsers share cookies between the ports of a host, and `vibe
    serve`'s inspector and `vibe inspect`'s have different keys."""
    server = scope.get("server")
    return f"{COOKIE}_{server[1]}" if server and server[1] else COOKIE


class KeyGuard:
    """Every request carries the inspector's key (header, cookie, or `?key=` which sets the cookie), else
    401. Only GET and HEAD pass: the key is read-only whatever route sits behind it."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app, self.key = app, key

    def _ok(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            refused = Response("the inspector is read-only", status_code=405, media_type="text/plain")
            await refused(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else ""
        cookie = cookie_name(scope)
        if self._ok(bearer) or self._ok(request.cookies.get(cookie, "")):
            await self.app(scope, receive, send)
        elif self._ok(request.query_params.get("key", "")):
            response = RedirectResponse(str(request.url.remove_query_params("key")), status_code=303)
            path = scope.get("root_path") or "/"  # under vibe serve: /inspect only
            response.set_cookie(cookie, self.key, path=path, httponly=True, samesite="strict")
            await response(scope, receive, send)
        else:
            message = "the inspector needs its key: open the address `vibe serve` or `vibe inspect` printed"
            await Response(message, status_code=401, media_type="text/plain")(scope, receive, send)


class Inspector:
    """The pages over one record (or none: an eval folder alone)."""

    def __init__(self, store: RecordStore | None, eval_dir: Path | None) -> None:
        self.store, self.env = store, _templates()
        self.evals = EvalFolder(eval_dir) if eval_dir is not None else None

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        base = request.scope.get("root_path", "")
        started = request.scope.get("avibe.started", time.perf_counter())
        html = self.env.get_template(name).render(base=base, has_record=self.store is not None,
                                                  has_eval=self.evals is not None, **values)  # fmt: skip
        took = (time.perf_counter() - started) * 1000
        return HTMLResponse(html, status_code=status, headers={"Server-Timing": f"app;dur={took:.1f}"})

    def _store(self) -> RecordStore:
        if self.store is None:
            raise AvibeError("no record to inspect here (only an eval folder was given)")
        return self.store

    async def home(self, request: Request) -> Response:
        if self.store is None and self.evals is not None:
            return RedirectResponse(f"{request.scope.get('root_path', '')}/eval", status_code=303)
        search = request.query_params.get("q", "")
        rows = await run_in_threadpool(pages.session_rows, self._store(), search)
        return self.render(request, "sessions.html.j2", rows=rows, q=search)

    async def session(self, request: Request) -> Response:
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/s/{request.path_params['session']}/timeline", status_code=303)

    def _filters(self, request: Request) -> tuple[Filters, dict[str, Any]]:
        params = request.query_params
        raw: dict[str, Any] = {k: params.get(k, "") for k in ("user", "from", "to", "since", "until", "grep")}
        raw["kind"] = params.getlist("kind")
        return parse_filters(raw), raw

    def _after(self, request: Request) -> int:
        value = (request.headers.get("last-event-id") or request.query_params.get("after", "0")).strip()
        if not (value.isascii() and value.lstrip("-").isdigit() and len(value) <= 20):
            raise BadFilter("after is a message number (a whole number)")
        if int(value) > MAX_SEQ:
            raise BadFilter(f"after is a message number, at most {MAX_SEQ:,}")
        return max(0, int(value))

    async def timeline(self, request: Request) -> Response:
        filters, raw = self._filters(request)
        after = self._after(request)
        session = request.path_params["session"]
        page = await run_in_threadpool(pages.timeline_page, self._store(), session, filters, after, raw)
        return self.render(request, "timeline.html.j2", t=page, session=page.session)

    async def stream(self, request: Request) -> Response:
        filters, _ = self._filters(request)
        after = self._after(request)
        store = self._store()
        info = await run_in_threadpool(store.get_session, request.path_params["session"])
        template = self.env.get_template("_entry.html.j2")
        base = request.scope.get("root_path", "")

        async def events() -> AsyncIterator[str]:
            last, quiet = after, 0.0
            yield "retry: 1000\n\n"
            while True:
                query = filters.query(info.id, last, 100)
                found = await run_in_threadpool(store.query, query)
                for entry in found:
                    html = template.render(row=pages.shown(entry), base=base, session=info)
                    data = json.dumps({"seq": entry.seq, "html": html})
                    yield f"id: {entry.seq}\nevent: entry\ndata: {data}\n\n"
                    last = entry.seq
                if found:
                    quiet = 0.0
                    continue
                await asyncio.sleep(POLL_S)
                quiet += POLL_S
                if quiet >= HEARTBEAT_S:
                    quiet = 0.0
                    yield ": still here\n\n"

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def context(self, request: Request) -> Response:
        data = await run_in_threadpool(pages.context_data, self._store(), request.path_params["session"])
        info = await run_in_threadpool(self._store().get_session, data["session"])
        return self.render(request, "context.html.j2", session=info, data=data)

    async def context_json(self, request: Request) -> Response:
        data = await run_in_threadpool(pages.context_data, self._store(), request.path_params["session"])
        return JSONResponse(data)

    async def checkpoints(self, request: Request) -> Response:
        store = self._store()
        info = await run_in_threadpool(store.get_session, request.path_params["session"])
        stored = await run_in_threadpool(store.list_checkpoints, info.id)
        return self.render(request, "checkpoints.html.j2", session=info, checkpoints=stored)

    async def checkpoint(self, request: Request) -> Response:
        session = request.path_params["session"]
        number = request.path_params["number"]
        if number > MAX_SEQ:
            return self.render(request, "error.html.j2", 404, message=f"no checkpoint {number} in {session}")
        view = await run_in_threadpool(pages.checkpoint_view, self._store(), session, number)
        if view is None:
            return self.render(request, "error.html.j2", 404, message=f"no checkpoint {number} in {session}")
        return self.render(request, "checkpoint.html.j2", v=view, session=view.session)

    async def eval_report(self, request: Request) -> Response:
        if self.evals is None:
            return self.render(
                request, "error.html.j2", 404, message="no eval folder (vibe inspect --eval DIR)"
            )
        base = request.scope.get("root_path", "")
        report = await run_in_threadpool(self.evals.report_html, f"{base}/eval/files/")
        return self.render(request, "eval.html.j2", report=Markup(report), folder=str(self.evals.folder))

    async def eval_file(self, request: Request) -> Response:
        found = self.evals.file(request.path_params["name"]) if self.evals else None
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain")
        # Same origin as the pages: an SVG's script would run with the inspector's rights. No script here.
        return FileResponse(found, headers={"Content-Security-Policy": FILE_CSP})


def _safe(inspector: Inspector, endpoint: Any) -> Any:
    async def run(request: Request) -> Response:
        request.scope["avibe.started"] = time.perf_counter()
        try:
            response: Response = await endpoint(request)
            return response
        except UnknownSession as exc:
            return inspector.render(request, "error.html.j2", 404, message=str(exc))
        except (AvibeError, ValueError) as exc:  # a bad filter, a record that cannot be read
            return inspector.render(request, "error.html.j2", 400, message=str(exc))
        except OverflowError:  # a number in the address past what the record's integers hold
            return inspector.render(request, "error.html.j2", 400, message="a number is out of range")

    return run


def inspector_app(
    store: RecordStore | None,
    *,
    key: str | None = None,
    eval_dir: Path | None = None,
    hosts: Hosts | None = None,
) -> Starlette:
    """The inspector over `store` (read only). `vibe serve` mounts it at /inspect, `vibe inspect` serves
    it alone. With `key` (a read-only capability, never the serve token), every request must carry it
    (both commands always give one). `eval_dir`: an
    eval results folder shown at /eval. `hosts`: the Host names it answers to (when served alone)."""
    inspector = Inspector(store, eval_dir)

    def route(path: str, endpoint: Any) -> Route:
        return Route(path, _safe(inspector, endpoint), methods=["GET"])

    routes: list[Route | Mount] = [
        route("/", inspector.home),
        route("/s/{session}", inspector.session),
        route("/s/{session}/timeline", inspector.timeline),
        route("/s/{session}/stream", inspector.stream),
        route("/s/{session}/context", inspector.context),
        route("/s/{session}/context.json", inspector.context_json),
        route("/s/{session}/checkpoints", inspector.checkpoints),
        route("/s/{session}/checkpoints/{number:int}", inspector.checkpoint),
        route("/eval", inspector.eval_report),
        route("/eval/files/{name}", inspector.eval_file),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    if key is not None:
        app.add_middleware(KeyGuard, key=key)
    app.add_middleware(SecurityHeaders)  # outside the key: a 401 is a page too
    if hosts is not None:
        app.add_middleware(HostGuard, hosts=hosts)
    return app
