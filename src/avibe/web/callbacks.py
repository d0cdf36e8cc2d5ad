"""A callback's own secret (`POST /callbacks/{feed}`, the one route of `vibe serve` that strangers may
call over TCP): an `avibe` callback's bearer secret or HMAC signature and the signature's window, the
verdict for every kind (the services' own schemes are avibe.web.webhooks), and the per-callback rate
limit. The request handling itself is `Api.callback` (avibe.web.server)."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.requests import Request

from avibe.web.webhooks import SERVICE_VERIFIERS, Refused, Verdict, Verified

CALLBACKS: Final = "/callbacks/"
SIGNATURE_WINDOW_S: Final = 300  # a signed callback is good this long either side of this host's clock


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


def callback_signature(secret: str, timestamp: str, key: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256 of "{timestamp}.{key}.{body}">`: what a signed callback carries in
    X-Avibe-Signature (the key is its Idempotency-Key header, empty when it sends none)."""
    message = f"{timestamp}.{key}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign_callback(secret: str, body: bytes, key: str = "", now: float | None = None) -> dict[str, str]:
    """The headers of a signed callback request (for senders written in Python, and the tests)."""
    timestamp = str(int(time.time() if now is None else now))
    headers = {
        "X-Avibe-Timestamp": timestamp,
        "X-Avibe-Signature": callback_signature(secret, timestamp, key, body),
    }
    return headers | ({"Idempotency-Key": key} if key else {})


def _signature_refused(request: Request, secret: str, body: bytes, now: float) -> str | None:
    """Why a signed callback is refused, or None when its signature is good and fresh."""
    timestamp = request.headers.get("x-avibe-timestamp", "").strip()
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        return "a signed callback needs X-Avibe-Timestamp: <unix seconds>"
    if abs(now - int(timestamp)) > SIGNATURE_WINDOW_S:
        return (
            f"X-Avibe-Timestamp is more than {SIGNATURE_WINDOW_S} s from this host's clock "
            "(a replay, or the sender's clock is wrong)"
        )
    given = request.headers.get("x-avibe-signature", "").strip().lower()
    key = request.headers.get("idempotency-key", "")
    expected = callback_signature(secret, timestamp, key, body)
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return 'wrong signature (HMAC-SHA256 of "{timestamp}.{Idempotency-Key}.{body}")'
    return None


def _avibe_verdict(request: Request, secret: str, body: bytes, now: float) -> Verdict:
    """An `avibe` callback's proof: its bearer secret, or its signature (whose hex is its delivery key
    when it sends no Idempotency-Key: a signed request records once all the same)."""
    if "x-avibe-signature" in request.headers:  # a signature decides, whatever else the request carries
        refused = _signature_refused(request, secret, body, now)
        if refused:
            return Refused(refused)
        return Verified(key="sig:" + request.headers["x-avibe-signature"].strip().lower()[7:])
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        if hmac.compare_digest(bearer[7:].strip().encode(), secret.encode()):
            return Verified()
        return Refused("wrong secret")
    return Refused("missing secret (Authorization: Bearer <secret>, or a signature)")


def callback_verdict(request: Request, spec: Mapping[str, Any], body: bytes, now: float) -> Verdict:
    """Whether a request to a callback feed of `spec` proved its sender, by the feed's kind (its
    service's scheme, avibe.web.webhooks), and what it is then: its delivery id and event."""
    kind, secret = spec.get("kind", "avibe"), str(spec["secret"])
    if kind == "avibe":
        return _avibe_verdict(request, secret, body, now)
    return SERVICE_VERIFIERS[kind](request.headers, body, secret, now)
