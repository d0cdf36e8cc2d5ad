"""`vibe watch`, `vibe timer`, `vibe callback`, `vibe feeds` and `vibe send` (SPEC T1).

Feeds are stored with the record, so whichever host runs the session (`vibe serve`, or `vibe run` while
it hosts it) runs them, and they survive a restart. Adding or removing one takes effect in a running host
within seconds.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from avibe.cli.options import BadArgument, check_session_id, print_table, require_session, terminal_safe
from avibe.cli.terminal import settings_or_die
from avibe.compose import SystemClock, open_record
from avibe.config import Settings
from avibe.ports import FeedStore, RecordStore
from avibe.record.feeds import ID_PREFIX, Feed, FeedKind

SessionArg = Annotated[
    str,
    typer.Option("--session", "-s", help="The session it posts into.", callback=check_session_id),
]
QueueOpt = Annotated[
    bool,
    typer.Option(
        "--queue", help="Its inputs wait for the agent's next turn instead of starting one while it is idle."
    ),
]


def _feeds(store: RecordStore) -> FeedStore:
    if not isinstance(store, FeedStore):
        raise BadArgument("this record store keeps no feeds")
    return store


def _add(kind: FeedKind, session: str, name: str, spec: dict[str, Any], wake: bool) -> tuple[Feed, Settings]:
    from avibe.sources.feeds import FeedSpecError, check_spec

    try:
        checked = check_spec(kind, spec)
    except FeedSpecError as exc:
        raise BadArgument(str(exc)) from None
    if not name.strip() or not name.isprintable():
        raise BadArgument(f"give the {kind} a name (printable text)")
    settings = settings_or_die()
    require_session(settings, session)  # read-only: an unknown session creates no record
    store = open_record(settings)
    feed = Feed(f"{ID_PREFIX[kind]}-{secrets.token_hex(4)}", session, kind, name.strip(), checked, wake)
    return _feeds(store).add_feed(feed), settings


def _state(feed: Feed) -> str:
    """removed, fired (a one-shot timer that posted: it has nothing more to post), or active."""
    from avibe.sources.feeds import feed_done

    if feed.removed_at:
        return "removed"
    return f"fired {feed.state['last_fire']}" if feed_done(feed) else "active"


def _list(kind: FeedKind | None, session: str | None, include_removed: bool) -> None:
    from avibe.sources.feeds import describe

    settings = settings_or_die()
    from avibe.errors import NoRecord
    from avibe.store import open_store

    try:
        store = open_store(settings.database_url, read_only=True)
    except NoRecord:
        return  # no record: nothing to list (exit 0, like `vibe sessions`)
    found = _feeds(store).list_feeds(session, include_removed=include_removed)
    rows = [
        [f.id, f.session, describe(f), "wake" if f.wake else "queue", _state(f)]
        for f in found
        if kind is None or f.kind == kind
    ]
    if rows:
        print_table(["ID", "SESSION", "WHAT", "MODE", "STATE"], rows)


def _remove(kind: FeedKind | None, feed_id: str) -> None:
    from avibe.errors import NoRecord
    from avibe.store import open_store

    settings = settings_or_die()
    try:  # look first, read-only: an unknown id changes nothing
        with open_store(settings.database_url, read_only=True) as reader:
            feed = reader.get_feed(feed_id)
    except NoRecord:
        raise BadArgument(f"no {kind or 'feed'} {feed_id!r}: there is no record yet") from None
    if kind is not None and feed.kind != kind:
        raise BadArgument(f"{feed_id} is a {feed.kind}, not a {kind}; use `vibe {feed.kind} rm {feed_id}`")
    _feeds(open_record(settings)).stop_feed(feed_id)
    typer.echo(f"removed {feed.kind} {feed.id} ({feed.name}) of session {feed.session}")


PLURALS: dict[FeedKind, str] = {"watch": "Watches", "timer": "Timers", "callback": "Callbacks"}


def _group(kind: FeedKind) -> typer.Typer:
    group = typer.Typer(help=f"{PLURALS[kind]} that post into a session.", no_args_is_help=True)

    @group.command("list")
    def list_(
        session: Annotated[str | None, typer.Option("--session", "-s", callback=check_session_id)] = None,
        removed: Annotated[bool, typer.Option("--removed", help="Include removed ones.")] = False,
    ) -> None:
        """List them (all sessions unless --session)."""
        _list(kind, session, removed)

    @group.command("rm")
    def rm(feed_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
        """Remove one (it stops posting; the record keeps what it posted)."""
        _remove(kind, feed_id)

    return group


watch_app = _group("watch")
timer_app = _group("timer")
callback_app = _group("callback")


@watch_app.command("add")
def watch_add(
    name: Annotated[str, typer.Argument(help="What the watch is called (shown in its tag).")],
    session: SessionArg,
    every: Annotated[str, typer.Option("--every", help="How often to look: 30s, 5m, 2h ...")] = "5m",
    command: Annotated[str | None, typer.Option("--command", help="A command (run in the sandbox).")] = None,
    file: Annotated[str | None, typer.Option("--file", help="A file (relative to the workdir).")] = None,
    url: Annotated[str | None, typer.Option("--url", help="An http(s) URL.")] = None,
    queue: QueueOpt = False,
) -> None:
    """Watch a command's output, a file or a URL; post when it changes (the first look sets the baseline)."""
    from avibe.sources.feeds import FeedSpecError, parse_every

    try:
        every_s = parse_every(every)
    except FeedSpecError as exc:
        raise BadArgument(str(exc)) from None
    spec = {"every_s": every_s, "command": command, "file": file, "url": url}
    feed, settings = _add("watch", session, name, {k: v for k, v in spec.items() if v is not None}, not queue)
    typer.echo(f"watch {feed.id} ({feed.name}) posts into session {feed.session} when it changes")
    if file is not None:
        _say_if_missing(settings, feed)


def _say_if_missing(settings: Settings, feed: Feed) -> None:
    """A file watch on a file that is not there: kept (a file a build or a job is yet to write is a real
    thing to watch - its appearing is the change it posts), but said, so a mistyped name is seen now."""

    from avibe.host.sessions import session_workdir
    from avibe.store import open_store

    with open_store(settings.database_url, read_only=True) as store:
        workdir = session_workdir(store, feed.session, Path.cwd())
    path = (workdir / Path(feed.spec["file"]).expanduser()).resolve()
    if not path.exists():
        shown = terminal_safe(str(path))
        typer.echo(f"vibe: warning: {shown} does not exist (yet); the watch posts when it appears", err=True)


@timer_app.command("add")
def timer_add(
    name: Annotated[str, typer.Argument(help="What the timer is called (shown in its tag).")],
    session: SessionArg,
    text: Annotated[str, typer.Option("--text", help="What it posts.")],
    at: Annotated[str | None, typer.Option("--at", help="Once, at 2026-12-01T09:00Z or +10m.")] = None,
    every: Annotated[str | None, typer.Option("--every", help="Every 30s, 5m, 2h, 1d ...")] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="On a cron schedule (UTC): '0 9 * * 1-5'.")
    ] = None,
    queue: QueueOpt = False,
) -> None:
    """Post TEXT once (--at), every interval (--every) or on a cron schedule (--cron)."""
    from avibe.sources.feeds import FeedSpecError, parse_at, parse_every

    try:
        spec: dict[str, Any] = {"text": text, "cron": cron}
        if at is not None:
            spec["at"] = parse_at(at, datetime.now(UTC)).isoformat()
        if every is not None:
            spec["every_s"] = parse_every(every)
    except FeedSpecError as exc:
        raise BadArgument(str(exc)) from None
    feed, _ = _add("timer", session, name, {k: v for k, v in spec.items() if v is not None}, not queue)
    typer.echo(f"timer {feed.id} ({feed.name}) posts into session {feed.session}")


KindOpt = Annotated[
    str,
    typer.Option(
        "--kind",
        help="Who posts and how it proves it: avibe (a bearer secret or Avibe's signature), github, gitlab, "
        "standard-webhooks, stripe or slack (their own signatures, as they send them).",
    ),
]
# Where each service takes the URL and the secret (docs/serve.md has a recipe per service).
_WHERE: Final[dict[str, str]] = {
    "github": "GitHub: Settings > Webhooks > Add webhook; Payload URL above, Content type application/json, "
    "Secret the secret",
    "gitlab": "GitLab: Settings > Webhooks > Add new webhook; URL above, Secret token the secret",
    "standard-webhooks": "the sender's webhook settings: endpoint URL above (its secret is the one you gave)",
    "stripe": "Stripe: Developers > Webhooks > Add endpoint; URL above (the signing secret is the file's)",
    "slack": "Slack: your app's Event Subscriptions > Request URL above (the signing secret is the file's)",
}
_GIVEN: Final = ("standard-webhooks", "stripe", "slack")  # the service makes the secret; Avibe cannot


def _secret(kind: str, secret_file: Path | None) -> str:
    """The secret from --secret-file (the service made it) or a new one (we make it, the person pastes it)."""
    if secret_file is None:
        if kind in _GIVEN:
            raise BadArgument(
                f"a {kind} callback needs --secret-file: the file holding the secret {kind} gave you"
            )
        return secrets.token_urlsafe(24)
    try:
        return secret_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadArgument(f"cannot read --secret-file {terminal_safe(str(secret_file))}: {exc}") from None


@callback_app.command("add")
def callback_add(
    name: Annotated[str, typer.Argument(help="What the callback is called (shown in its tag).")],
    session: SessionArg,
    kind: KindOpt = "avibe",
    secret_file: Annotated[
        Path | None, typer.Option("--secret-file", help="A file holding the secret (else one is made).")
    ] = None,
    max_bytes: Annotated[
        int | None,
        typer.Option("--max-bytes", help="Largest body accepted (413 past it; 64 KiB, 1 MiB for a service)."),
    ] = None,
    per_minute: Annotated[int, typer.Option("--per-minute", help="Requests a minute (429 past it).")] = 60,
    queue: QueueOpt = False,
) -> None:
    """An HTTP endpoint on `vibe serve`: POST a body to it with the secret; the body becomes an input."""
    secret = _secret(kind, secret_file)  # checked with the limits in _add, before anything is written
    spec: dict[str, Any] = {"kind": kind, "secret": secret, "per_minute": per_minute}
    if max_bytes is not None:
        spec["max_bytes"] = max_bytes
    feed, settings = _add("callback", session, name, spec, not queue)
    url = f"{settings.serve_url}/callbacks/{feed.id}"
    typer.echo(f"callback {feed.id} ({feed.name}) posts into session {feed.session}")
    typer.echo(f"url:    {url}")
    if secret_file is None:
        typer.echo(f"secret: {secret}")
    if kind != "avibe":
        typer.echo(f"paste:  {_WHERE[kind]}")
        return
    typer.echo(
        "send:   curl -X POST -H 'Authorization: Bearer <secret>' -H 'Idempotency-Key: <unique id>' "
        f"--data-binary @body.txt {url}"
    )
    typer.echo(
        "        (or sign it: X-Avibe-Timestamp: <unix seconds> and X-Avibe-Signature: sha256=<hex "
        'HMAC-SHA256 with the secret of "<timestamp>.<Idempotency-Key>.<body>">, good for 5 minutes)'
    )


def feeds(
    session: Annotated[str | None, typer.Option("--session", "-s", callback=check_session_id)] = None,
    removed: Annotated[bool, typer.Option("--removed", help="Include removed ones.")] = False,
) -> None:
    """List every watch, timer and callback (all sessions unless --session)."""
    _list(None, session, removed)


def send(
    text: Annotated[str, typer.Argument(help="The message.")],
    to: Annotated[str, typer.Option("--to", help="The session.", callback=check_session_id)],
) -> None:
    """Post your message into a session (a running `vibe serve` or `vibe run` hosting it picks it up)."""
    from avibe.cli.options import check_task
    from avibe.ingress import deliver
    from avibe.record.entries import Source

    try:
        message = check_task(text)
    except typer.BadParameter as exc:
        raise BadArgument(str(exc)) from None
    settings = settings_or_die()
    require_session(settings, to)
    store = open_record(settings)
    entry = deliver(store, to, Source("user", name=settings.user_name), message, clock=SystemClock())
    typer.echo(f"sent to session {entry.session} as message #{entry.seq}")


def register(app: typer.Typer) -> None:
    app.add_typer(watch_app, name="watch")
    app.add_typer(timer_app, name="timer")
    app.add_typer(callback_app, name="callback")
    app.command("feeds")(feeds)
    app.command("send")(send)
