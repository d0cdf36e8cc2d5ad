"""The verifier of each kind of callback feed (SPEC T1, docs/serve.md): the services people already use
post into a session as they are, each checked the way that service signs.

    kind               proof                                      fresh for      recorded once by
    avibe              Bearer secret, or X-Avibe-Signature        5 min (signed) Idempotency-Key / signature
    github             X-Hub-Signature-256 over the body          (no time)      X-GitHub-Delivery
    gitlab             X-Gitlab-Token                             (no time)      Idempotency-Key / event UUID
    standard-webhooks  webhook-signature over id.timestamp.body   5 min          webhook-id
    stripe             Stripe-Signature t=,v1= over t.body        5 min          the event's id
    slack              X-Slack-Signature over v0:timestamp:body   5 min          event_id / signature

Every compare is constant-time. The event a tag names comes from the verified headers only, never from
the body: GitHub and GitLab name it in a header; Standard Webhooks, Stripe and Slack put it in the body,
so their tag names the service alone and the digest (avibe.record.digests) shows the body's type. A
GitHub `ping` and Slack's `url_verification` are answered as those services expect and recorded nowhere.
Standard Webhooks and Slack verify with their own libraries (`standardwebhooks`, `slack_sdk`); Stripe's
SDK is large, so its documented scheme is the few lines below (the tests sign with Stripe's SDK).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

WINDOW_S: Final = 300  # each timestamped scheme's own tolerance (Standard Webhooks, Stripe, Slack: 5 min)
_KEY_CHARS: Final = 100  # a delivery id longer than this (or odd) is keyed by its hash
_GITHUB_EVENT: Final = re.compile(r"[a-z_]{1,40}")
_GITLAB_EVENT: Final = re.compile(r"[A-Za-z][A-Za-z ]{0,39}")
_DIGITS: Final = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True, slots=True)
class Verified:
    """A request that proved its sender. `key`: its delivery id within the feed ("" when it has none);
    `event`: what the tag names ("github push", "" for avibe); `reply`: a handshake's JSON answer (200),
    given instead of recording anything."""

    key: str = ""
    event: str = ""
    reply: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a request is refused (401): unsigned, mis-signed or stale."""

    reason: str


Verdict = Verified | Refused
Headers = Mapping[str, str]


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of two header values (a non-ASCII one is simply wrong, never an error)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def _hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _id(value: str) -> str:
    """A sender's delivery id as part of a delivery key: as sent when short and plain, else its hash."""
    value = value.strip()
    if len(value) <= _KEY_CHARS and value.isascii() and value.isprintable():
        return value
    return "h:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:40]


def _stale(timestamp: str, now: float, header: str) -> str | None:
    if not _DIGITS.fullmatch(timestamp):
        return f"{header} must be the Unix time in seconds"
    if abs(now - int(timestamp)) > WINDOW_S:
        return f"{header} is more than {WINDOW_S} s from this host's clock (a replay, or a wrong clock)"
    return None


def _json_field(body: bytes, name: str) -> str:
    """A top-level string field of a JSON body ("" when the body is not JSON or has none)."""
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    value = found.get(name) if isinstance(found, dict) else None
    return value if isinstance(value, str) else ""


def verify_github(headers: Headers, body: bytes, secret: str, now: float) -> Verdict:
    given = headers.get("x-hub-signature-256", "").strip()
    if not given:
        return Refused("missing X-Hub-Signature-256 (give the webhook this callback's secret in GitHub)")
    if not _same(given.lower(), "sha256=" + _hmac_hex(secret, body)):
        return Refused("wrong X-Hub-Signature-256 (HMAC-SHA256 of the body with this callback's secret)")
    event = headers.get("x-github-event", "").strip()
    if not _GITHUB_EVENT.fullmatch(event):
        return Refused("missing or malformed X-GitHub-Event")
    if event == "ping":  # GitHub's hello when a webhook is made: a 2xx, nothing recorded
        return Verified(event="github ping", reply={"ok": True, "ping": "pong"})
    delivery = headers.get("x-github-delivery", "")
    # No delivery id: the body's signature stands in for it (a redelivery sends the same body).
    return Verified(
        key=_id(delivery) if delivery.strip() else "sig:" + given[7:].lower(), event=f"github {event}"
    )


def verify_gitlab(headers: Headers, body: bytes, secret: str, now: float) -> Verdict:
    token = headers.get("x-gitlab-token", "")
    if not token:
        return Refused("missing X-Gitlab-Token (give the webhook this callback's secret as its token)")
    if not _same(token, secret):
        return Refused("wrong X-Gitlab-Token")
    event = headers.get("x-gitlab-event", "").strip()
    if not _GITLAB_EVENT.fullmatch(event):
        return Refused("missing or malformed X-Gitlab-Event")
    # GitLab keeps Idempotency-Key across the retries of one event (17.4+); older ones send the UUID.
    delivery = headers.get("idempotency-key", "") or headers.get("x-gitlab-event-uuid", "")
    return Verified(key=_id(delivery) if delivery.strip() else "", event=f"gitlab {event.lower()}")


def verify_standard(headers: Headers, body: bytes, secret: str, now: float) -> Verdict:
    from standardwebhooks.webhooks import Webhook  # the spec's own reference library

    msg_id, timestamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "").strip()
    signatures = headers.get("webhook-signature", "")
    if not (msg_id and timestamp and signatures):
        return Refused("missing webhook-id, webhook-timestamp or webhook-signature")
    stale = _stale(timestamp, now, "webhook-timestamp")
    if stale:
        return Refused(stale)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Refused("the body is not UTF-8, so its signature cannot match")
    at = datetime.fromtimestamp(int(timestamp), UTC)
    expected = Webhook(secret).sign(msg_id=msg_id, timestamp=at, data=text)
    if not any(_same(given, expected) for given in signatures.split()):  # "v1,<base64> v1,<base64>"
        return Refused("wrong webhook-signature (v1: HMAC-SHA256 of id.timestamp.body)")
    return Verified(key=_id(msg_id), event="standard-webhooks")


def verify_stripe(headers: Headers, body: bytes, secret: str, now: float) -> Verdict:
    header = headers.get("stripe-signature", "")
    if not header:
        return Refused("missing Stripe-Signature (use the endpoint's signing secret, whsec_...)")
    pairs = [item.strip().partition("=") for item in header.split(",")]
    timestamp = next((value for key, _, value in pairs if key == "t"), "")
    signatures = [value for key, _, value in pairs if key == "v1"]
    if not signatures:
        return Refused("Stripe-Signature has no v1 signature")
    stale = _stale(timestamp, now, "Stripe-Signature's t")
    if stale:
        return Refused(stale)
    expected = _hmac_hex(secret, f"{timestamp}.".encode() + body)
    if not any(_same(given, expected) for given in signatures):
        return Refused("wrong Stripe-Signature (v1: HMAC-SHA256 of t.body with the signing secret)")
    event_id = _json_field(body, "id")  # Stripe's retries resend the same event
    return Verified(key=_id(event_id) if event_id else "sig:" + signatures[0].lower(), event="stripe")


def verify_slack(headers: Headers, body: bytes, secret: str, now: float) -> Verdict:
    from slack_sdk.signature import Clock, SignatureVerifier  # Slack's own verifier

    class _Now(Clock):
        def now(self) -> float:
            return now

    timestamp = headers.get("x-slack-request-timestamp", "").strip()
    signature = headers.get("x-slack-signature", "").strip()
    if not (timestamp and signature):
        return Refused("missing X-Slack-Request-Timestamp or X-Slack-Signature (the app's signing secret)")
    stale = _stale(timestamp, now, "X-Slack-Request-Timestamp")
    if stale:
        return Refused(stale)
    if not signature.isascii():
        return Refused("wrong X-Slack-Signature")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return Refused("the body is not UTF-8, so its signature cannot match")
    if not SignatureVerifier(secret, clock=_Now()).is_valid(body, timestamp, signature):
        return Refused("wrong X-Slack-Signature (v0: HMAC-SHA256 of v0:timestamp:body)")
    if _json_field(body, "type") == "url_verification":  # Slack's handshake when the URL is set
        return Verified(event="slack", reply={"challenge": _json_field(body, "challenge")})
    event_id = _json_field(body, "event_id")  # Slack's retries (X-Slack-Retry-Num) resend it
    return Verified(key=_id(event_id) if event_id else "sig:" + signature.lower(), event="slack")


SERVICE_VERIFIERS: Final[dict[str, Callable[[Headers, bytes, str, float], Verdict]]] = {
    "github": verify_github,
    "gitlab": verify_gitlab,
    "standard-webhooks": verify_standard,
    "stripe": verify_stripe,
    "slack": verify_slack,
}
