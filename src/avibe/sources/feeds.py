"""Feeds at work: watches and timers that post into a live session (SPEC T1).

`check_spec` validates what a feed is (the CLI and the store's readers use it); `timer_due` and
`watch_due` are the pure rules for when one fires; `FeedRunner` is the session host's `InputSource`
for every watch and timer of one session. It re-reads the session's feeds now and then (a feed added or
removed with the CLI takes effect in a running host), runs due watch checks in worker threads (a slow
command never holds the agent's turn) and delivers their results in the host's own thread, each with an
idempotency key: a timer fire is keyed by its scheduled time, a watch change by its change number, so a
crash between delivering and saving the feed's state, or two hosts running the same feed, records it
once. Callbacks are not run here: they arrive over HTTP (`vibe serve`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from croniter import croniter

from avibe.errors import AvibeError
from avibe.ports import Clock, FeedStore, KeyedDelivery
from avibe.record.entries import Entry, Source
from avibe.record.feeds import CALLBACK_KINDS, FEED_KINDS, CallbackKind, Feed, FeedKind
from avibe.sources.agent_files import read_agent_file
from avibe.sources.process import read_bounded

if TYPE_CHECKING:
    from avibe.tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)

MIN_EVERY_S: Final = 1.0
MAX_EVERY_S: Final = 366 * 86_400.0
WATCH_MAX_BYTES: Final = 16 * 1024 * 1024  # a watched file larger than this is reported, not read
SHOWN_CHARS: Final = 2_000  # what a watch input shows of the new output (the head and the tail)
COMMAND_TIMEOUT_S: Final = 60.0
URL_TIMEOUT_S: Final = 15.0
RELOAD_S: Final = 2.0  # how often a running host re-reads the session's feeds
DEFAULT_CALLBACK_MAX_BYTES: Final = 64 * 1024
DEFAULT_CALLBACK_PER_MINUTE: Final = 60
# A service's events are larger than a note (a GitHub push with its commits is 10-40 KB; GitHub sends
# up to 25 MB): 1 MiB by default, --max-bytes for more.
DEFAULT_SERVICE_MAX_BYTES: Final = 1024 * 1024
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", re.IGNORECASE)
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


class FeedSpecError(AvibeError, ValueError):
    """A feed described wrongly; the message names the field and what would be right."""


# ---- what a feed is -------------------------------------------------------------------------------


def parse_every(text: str) -> float:
    """'30s', '5m', '2h', '1d' or plain seconds -> seconds (at least 1 s, at most a year)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise FeedSpecError(f"--every {text!r} is not a duration; write e.g. 30s, 5m, 2h or 1d")
    seconds = float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]
    if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
        raise FeedSpecError(f"--every {text!r} is {seconds:g} s; it must be between 1 s and 366 days")
    return seconds


def parse_at(text: str, now: datetime) -> datetime:
    """An ISO time ('2026-12-01T09:00', a zone or 'Z' allowed; UTC when none) or '+10m' from now."""
    if text.strip().startswith("+"):
        return now + timedelta(seconds=parse_every(text.strip()[1:]))
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise FeedSpecError(f"--at {text!r} is not a time; write e.g. 2026-12-01T09:00Z or +10m") from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _need(spec: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = spec.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise FeedSpecError(f"{what}: {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _every(spec: Mapping[str, Any], what: str) -> float:
    every = spec.get("every_s")
    if isinstance(every, bool) or not isinstance(every, int | float) or not math.isfinite(every):
        raise FeedSpecError(f"{what}'s every_s must be a number of seconds, got {every!r}")
    if not MIN_EVERY_S <= every <= MAX_EVERY_S:
        raise FeedSpecError(f"{what} runs every 1 s to 366 days, not every {every:g} s")
    return float(every)


def _check_watch(spec: Mapping[str, Any]) -> dict[str, Any]:
    every = _every(spec, "a watch")
    targets = [key for key in ("command", "file", "url") if spec.get(key)]
    if len(targets) != 1:
        raise FeedSpecError("a watch watches exactly one of --command, --file or --url")
    target = targets[0]
    value = _need(spec, target, str, f"a {target} watch")
    if target == "url" and not re.match(r"https?://", value):
        raise FeedSpecError(f"a URL watch needs an http:// or https:// URL, got {value!r}")
    return {"every_s": every, target: value}


def _check_timer(spec: Mapping[str, Any]) -> dict[str, Any]:
    text = _need(spec, "text", str, "a timer")
    if not text.strip():
        raise FeedSpecError("a timer needs the text it posts (--text)")
    whens = [key for key in ("at", "every_s", "cron") if spec.get(key) is not None]
    if len(whens) != 1:
        raise FeedSpecError("a timer fires by exactly one of --at, --every or --cron")
    when = whens[0]
    checked: dict[str, Any] = {"text": text}
    if when == "at":
        checked["at"] = parse_at(_need(spec, "at", str, "a one-shot timer"), datetime.now(UTC)).isoformat()
    elif when == "every_s":
        checked["every_s"] = _every(spec, "a timer")
    else:
        expression = _need(spec, "cron", str, "a cron timer")
        if not croniter.is_valid(expression):
            raise FeedSpecError(f"--cron {expression!r} is not a cron expression (e.g. '0 9 * * 1-5')")
        checked["cron"] = expression
    return checked


def _secret_refused(kind: CallbackKind, secret: str) -> str | None:
    """Why `secret` cannot be a `kind` callback's secret (the format its service gives it in), or None."""
    if len(secret) < 16 or secret != secret.strip() or not secret.isprintable():
        return "a callback's secret must be at least 16 characters, printable, with no space around them"
    if kind == "stripe" and not secret.startswith("whsec_"):
        return "a Stripe signing secret starts with whsec_ (the endpoint's page in Stripe shows it)"
    if kind == "standard-webhooks":
        try:  # the spec's format: whsec_ then the key in base64 (padding optional)
            key = base64.b64decode(secret.removeprefix("whsec_") + "==", validate=True)
        except binascii.Error:
            key = b""
        if len(key) < 16:
            return "a Standard Webhooks secret is whsec_ and a 16+ byte key in base64, as the sender shows it"
    return None


def _check_callback(spec: Mapping[str, Any]) -> dict[str, Any]:
    kind = spec.get("kind", "avibe")
    if kind not in CALLBACK_KINDS:
        raise FeedSpecError(f"a callback's kind is one of {', '.join(CALLBACK_KINDS)}, not {kind!r}")
    secret = _need(spec, "secret", str, "a callback")
    refused = _secret_refused(kind, secret)
    if refused:
        raise FeedSpecError(refused)
    default_bytes = DEFAULT_CALLBACK_MAX_BYTES if kind == "avibe" else DEFAULT_SERVICE_MAX_BYTES
    max_bytes = spec.get("max_bytes", default_bytes)
    per_minute = spec.get("per_minute", DEFAULT_CALLBACK_PER_MINUTE)
    for key, value, top in (("max_bytes", max_bytes, 10 * 1024 * 1024), ("per_minute", per_minute, 100_000)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise FeedSpecError(f"a callback's {key} must be a whole number from 1 to {top:,}, got {value!r}")
    return {"kind": kind, "secret": secret, "max_bytes": max_bytes, "per_minute": per_minute}


def check_spec(kind: FeedKind, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as stored: checked, normalised, nothing extra. Raises FeedSpecError."""
    if kind == "watch":
        return _check_watch(spec)
    if kind == "timer":
        return _check_timer(spec)
    if kind == "callback":
        return _check_callback(spec)
    raise FeedSpecError(f"unknown feed kind {kind!r}; the kinds are {', '.join(FEED_KINDS)}")


def describe(feed: Feed) -> str:
    """One line saying what the feed does (`vibe feeds`, the scene's Waiting for)."""
    spec = feed.spec
    if feed.kind == "watch":
        target = next(f"{key} {spec[key]}" for key in ("command", "file", "url") if key in spec)
        return f"watch {feed.name}: {target}, every {_seconds(spec['every_s'])}"
    if feed.kind == "timer":
        when = (
            f"at {spec['at']}" if "at" in spec
            else f"every {_seconds(spec['every_s'])}" if "every_s" in spec
            else f"cron {spec['cron']}"
        )  # fmt: skip
        return f"timer {feed.name}: {when}"
    kind = spec.get("kind", "avibe")
    service = "" if kind == "avibe" else f"from {kind}, "
    return f"callback {feed.name}: {service}up to {spec['max_bytes']:,} bytes, {spec['per_minute']}/min"


def _seconds(value: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


# ---- when a feed fires (pure) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fire:
    """A timer fire that is due: its scheduled time and how many scheduled fires it stands for (more
    than one when no host ran the timer for a while: it fires once, and says so)."""

    at: datetime
    count: int


def _state_time(feed: Feed, key: str) -> datetime | None:
    """A time the feed saved in its state; None when absent or unreadable (a damaged state is not fatal:
    the feed starts over from its creation, and a repeated fire is caught by its delivery key)."""
    value = feed.state.get(key)
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        log.warning("feed %s: its state's %s %r is not a time; ignoring it", feed.id, key, value)
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _anchor(feed: Feed) -> datetime:
    return _state_time(feed, "last_fire") or feed.created_at or datetime.now(UTC)


def timer_due(feed: Feed, now: datetime) -> Fire | None:
    """The timer's fire due at `now` (None when none is): the latest scheduled time since the last fire."""
    spec, anchor = feed.spec, _anchor(feed)
    if "at" in spec:
        at = datetime.fromisoformat(spec["at"])
        return Fire(at, 1) if now >= at and "last_fire" not in feed.state else None
    if "every_s" in spec:
        every = float(spec["every_s"])
        count = int((now - anchor).total_seconds() // every)
        return Fire(anchor + timedelta(seconds=every * count), count) if count >= 1 else None
    schedule = croniter(spec["cron"], anchor)
    fire: datetime | None = None
    count = 0
    while count < 10_000:
        upcoming = schedule.get_next(datetime)
        if upcoming > now:
            break
        fire, count = upcoming, count + 1
    return None if fire is None else Fire(fire.astimezone(UTC), count)


def feed_done(feed: Feed) -> bool:
    """A one-shot timer that fired: it posts nothing more, so it is listed as fired, is no longer waited
    for, and keeps no host running."""
    return feed.kind == "timer" and "at" in feed.spec and "last_fire" in feed.state


def watch_due(feed: Feed, now: datetime) -> bool:
    checked = _state_time(feed, "checked_at")
    return checked is None or now >= checked + timedelta(seconds=float(feed.spec["every_s"]))


def timer_text(feed: Feed, fire: Fire) -> str:
    missed = (
        f"\n({fire.count - 1} earlier scheduled fires passed while no host ran it)" if fire.count > 1 else ""
    )
    return f"{feed.spec['text']}{missed}"


# ---- what a watch sees ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """What a watch saw: a digest of all of it, and the text an input shows when it changed."""

    digest: str
    text: str


def _shown(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    half = SHOWN_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - SHOWN_CHARS:,} characters not shown ...]\n{text[-half:]}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _watch_root(path: Path, workdir: Path | None) -> tuple[Path, Path]:
    """(root, path below it) a watched file is read from: the workdir when it lies inside (as written, no
    link resolved), so no link the agent plants there is followed; else its own folder (the person's
    choice), the file itself never a link."""
    if workdir is not None:
        for base in dict.fromkeys((workdir, workdir.resolve())):
            if path.is_relative_to(base) and path != base:
                return base, path.relative_to(base)
    return path.parent, Path(path.name)


def observe_file(
    path: Path, *, workdir: Path | None = None, own: Collection[tuple[int, int]] = ()
) -> Observation:
    """What a watched file holds now, read the one way the harness reads where the agent writes
    (avibe/sources/agent_files.py): a file that became a link is reported so, its target never read;
    Avibe's own files (`own`, by identity) are never read."""
    root, below = _watch_root(Path(os.path.normpath(path)), workdir)
    found = read_agent_file(root, below, max_bytes=WATCH_MAX_BYTES, own=own, text=False)
    if found.status == "missing":
        return Observation("missing", f"{path} does not exist (it was deleted or not created yet)")
    if found.status == "link":
        return Observation("link", f"{path} became a link; it was not read (links are not followed)")
    if found.status == "too_big":
        return Observation(f"too-big:{found.size}", f"{path} changed; {found.why()}, so it is not shown")
    if not found.ok:
        return Observation(f"unread:{found.status}:{found.detail}", f"{path} cannot be read: {found.why()}")
    body = found.data.decode("utf-8", errors="replace")
    return Observation(_digest(found.data), f"{path} changed ({found.size:,} bytes):\n{_shown(body)}")


def observe_url(url: str, timeout_s: float = URL_TIMEOUT_S) -> Observation:
    import httpx  # only URL watches need it

    try:
        response = httpx.get(url, timeout=timeout_s, follow_redirects=True)
    except httpx.HTTPError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        return Observation(f"error:{reason}", f"{url} cannot be reached ({reason})")
    body = response.content
    digest = _digest(f"{response.status_code}\n".encode() + body)
    text = body.decode(response.encoding or "utf-8", errors="replace")
    return Observation(digest, f"{url} changed (HTTP {response.status_code}):\n{_shown(text)}")


def observe_command(policy: SandboxPolicy, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> Observation:
    """Run `command` in the tool sandbox (the session's policy) and see its output and exit code."""
    with tempfile.TemporaryDirectory(prefix="avibe-watch-") as scratch:
        output_path, report = Path(scratch) / "output", Path(scratch) / "report"
        with output_path.open("wb") as output:
            process = policy.start(command, output, report)
            deadline = time.monotonic() + timeout_s
            while process.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            ended = process.stop()
        text, size = read_bounded(output_path, 200_000)
    code = "timed out" if ended.code is None else f"exit {ended.code}"
    digest = _digest(f"{code}\n{size}\n{text}".encode(errors="replace"))
    return Observation(digest, f"`{command}` output changed ({code}):\n{_shown(text)}")


def observe(feed: Feed, policy: SandboxPolicy | None) -> Observation:
    spec = feed.spec
    if "file" in spec:
        base = policy.workdir if policy is not None else Path.cwd()
        own = policy.own.identities() if policy is not None else frozenset()
        return observe_file(base / Path(spec["file"]).expanduser(), workdir=base, own=own)
    if "url" in spec:
        return observe_url(spec["url"])
    if policy is None:
        return Observation("error:no-sandbox", f"`{spec['command']}` cannot run: this host has no sandbox")
    return observe_command(policy, spec["command"])


# ---- the runner: an InputSource of the session host -----------------------------------------------


class FeedRunner:
    """The watches and timers of one session, as the session host's `InputSource`. `deliver` records an
    input with its idempotency key (the host's delivery port); `policy` is the session's sandbox, where
    command watches run (None: they report that they cannot)."""

    def __init__(
        self,
        store: FeedStore,
        session_id: str,
        deliver: KeyedDelivery,
        clock: Clock,
        *,
        policy: SandboxPolicy | None = None,
        observe_with: Callable[[Feed, SandboxPolicy | None], Observation] = observe,
        workers: int = 2,
    ) -> None:
        self._store, self._session, self._deliver, self._clock = store, session_id, deliver, clock
        self._policy, self._observe = policy, observe_with
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"feeds-{session_id}")
        self._feeds: list[Feed] = []
        self._loaded_at = -math.inf
        self._checks: dict[str, Future[Observation]] = {}

    def feeds(self) -> list[Feed]:
        """The session's active feeds, re-read at most every RELOAD_S."""
        if time.monotonic() - self._loaded_at >= RELOAD_S:
            self._feeds = self._store.list_feeds(self._session)
            self._loaded_at = time.monotonic()
        return self._feeds

    def poll(self) -> None:
        now = self._clock.now()
        self._collect_checks(now)
        for feed in self.feeds():
            if feed.kind == "timer":
                self._fire_timer(feed, now)
            elif feed.kind == "watch" and feed.id not in self._checks and watch_due(feed, now):
                self._checks[feed.id] = self._pool.submit(self._observe, feed, self._policy)

    def queued(self, entry: Entry) -> bool:
        """An input of a feed in "queue" mode: it waits for the next turn instead of starting one."""
        if entry.kind not in ("watch", "timer", "callback") or not entry.source.ref:
            return False
        return any(feed.id == entry.source.ref and not feed.wake for feed in self.feeds())

    def waiting_for(self) -> tuple[str, ...]:
        return ()  # standing feeds never hold `vibe run` open; the scene names them (see `scene_lines`)

    def scene_lines(self) -> tuple[tuple[str, str, str, str, str], ...]:
        """(id, what, "", "", kind) for the scene's Waiting for (S3): each watch and timer still to post."""
        return tuple(
            (feed.id, describe(feed), "", "", feed.kind)
            for feed in self.feeds()
            if feed.kind != "callback" and not feed_done(feed)
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _fire_timer(self, feed: Feed, now: datetime) -> None:
        fire = timer_due(feed, now)
        if fire is None:
            return
        source = Source("timer", name=feed.name, ref=feed.id)
        self._deliver(source, timer_text(feed, fire), f"timer:{feed.id}:{fire.at.isoformat()}")
        state = {**feed.state, "last_fire": fire.at.isoformat(), "fires": int(feed.state.get("fires", 0)) + 1}
        self._save(feed, state)

    def _collect_checks(self, now: datetime) -> None:
        for feed_id, future in list(self._checks.items()):
            if not future.done():
                continue
            del self._checks[feed_id]
            feed = next((f for f in self._feeds if f.id == feed_id), None)
            if feed is None:  # removed while it ran
                continue
            try:
                seen = future.result()
            except Exception as exc:  # a broken check is reported to the log, the watch keeps going
                log.warning("watch %s (%s) failed: %s", feed.id, feed.name, exc, exc_info=exc)
                seen = Observation(f"error:{type(exc).__name__}", f"the watch failed: {exc}")
            self._observed(feed, seen, now)

    def _observed(self, feed: Feed, seen: Observation, now: datetime) -> None:
        state = {**feed.state, "checked_at": now.isoformat()}
        before = feed.state.get("digest")
        if before is not None and before != seen.digest:  # the first check only sets the baseline
            changes = int(feed.state.get("changes", 0)) + 1
            source = Source("watch", name=feed.name, ref=feed.id)
            self._deliver(source, seen.text, f"watch:{feed.id}:{changes}")
            state["changes"] = changes
        state["digest"] = seen.digest
        self._save(feed, state)

    def _save(self, feed: Feed, state: dict[str, Any]) -> None:
        self._store.save_feed_state(feed.id, state)
        self._feeds = [
            Feed(f.id, f.session, f.kind, f.name, f.spec, f.wake, state, f.created_at, f.removed_at)
            if f.id == feed.id
            else f
            for f in self._feeds
        ]
