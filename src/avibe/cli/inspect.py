"""`vibe inspect`: the web inspector alone, read-only, on 127.0.0.1.

The record is opened read-only (as `vibe log` opens it); live updates read what any other process
writes. Every request needs a key, on loopback too (an agent's sandboxed command may share the machine's
network): a random read-only one for this run, never the serve token - a browser sends the cookie it
lands in to every port of 127.0.0.1 (RFC 6265 8.5), a dev server of the agent's included. The printed
address carries it once; the browser then keeps it in a cookie. Only loopback names and the address
bound are answered as Host (DNS rebinding). The browser opens on the address unless --no-browser or
no display."""

from __future__ import annotations

import os
import secrets
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer

from avibe.cli.options import BadArgument, check_session_id
from avibe.config import load_settings
from avibe.errors import NoRecord
from avibe.ports import RecordStore


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


def _open_record(session: str | None, eval_dir: Path | None) -> RecordStore | None:
    from avibe.store import open_store

    try:
        store = open_store(load_settings().database_url, read_only=True)
    except NoRecord:
        if eval_dir is not None and session is None:
            return None  # an eval folder alone needs no record
        raise
    if session is not None:
        store.get_session(session)  # an unknown one is one line, exit 2
    return store


def inspect(
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Open on this session's timeline.", callback=check_session_id),
    ] = None,
    latest: Annotated[
        bool,
        typer.Option("--latest", help="Open on the most recently active session (the demo's, after it)."),
    ] = False,
    eval_dir: Annotated[
        Path | None, typer.Option("--eval", help="An eval results folder (vibe eval --out) to show.")
    ] = None,
    port: Annotated[int, typer.Option("--port", help="Port (0: any free one).")] = 8766,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    browser: Annotated[bool, typer.Option("--browser/--no-browser", help="Open the browser on it.")] = True,
) -> None:
    """Inspect the record in the browser: sessions, timelines, checkpoints, the context over time."""
    import uvicorn

    from avibe.web.guard import Hosts, listen_socket
    from avibe.web.inspector import inspector_app

    if not 0 <= port < 65_536:
        raise BadArgument(f"--port {port} is not a port (0-65535)")
    if eval_dir is not None and not eval_dir.is_dir():
        raise BadArgument(f"--eval {eval_dir} is not a folder")
    store = _open_record(session, eval_dir if not latest else None)
    if latest and session is None and store is not None:
        found = store.latest_session()
        if found is None:
            raise BadArgument("there are no sessions in the record yet")
        session = found.id
    listening = listen_socket(host, port, instead="choose another --port")
    key = secrets.token_urlsafe(24)  # read-only, this run's only (never AVIBE_SERVE_TOKEN)
    app = inspector_app(
        store, key=key, eval_dir=eval_dir.resolve() if eval_dir else None, hosts=Hosts.of(host)
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    path = f"/s/{quote(session)}/timeline" if session else ("/eval" if store is None else "/")
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{listening.getsockname()[1]}{path}?key={quote(key)}"
    typer.echo(f"[inspect] {url} (read-only; Ctrl-C stops)")
    if browser and _has_display():
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        listening.close()


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
