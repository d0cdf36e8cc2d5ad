"""The verifiers of avibe.web.webhooks as pure functions (SPEC T1): for any body, the request its
service's own signer signs is verified, and the same headers over any other body are refused - the
guarantee a callback's record rests on."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from datetime import UTC, datetime

import stripe
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier
from standardwebhooks.webhooks import Webhook

from avibe.web.webhooks import Refused, Verified, verify_github, verify_slack, verify_standard, verify_stripe

NOW = 1_800_000_000
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # a valid secret of every kind below


def _github(body: bytes) -> dict[str, str]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"x-hub-signature-256": signature, "x-github-event": "push", "x-github-delivery": "d-1"}


def _standard(body: bytes) -> dict[str, str]:
    signature = Webhook(SECRET).sign("msg_1", datetime.fromtimestamp(NOW, UTC), body.decode())
    return {"webhook-id": "msg_1", "webhook-timestamp": str(NOW), "webhook-signature": signature}


def _stripe(body: bytes) -> dict[str, str]:
    return {"stripe-signature": stripe.WebhookSignature.generate_signature_header(body.decode(), SECRET, NOW)}


def _slack(body: bytes) -> dict[str, str]:
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=str(NOW), body=body) or ""
    return {"x-slack-request-timestamp": str(NOW), "x-slack-signature": signature}


SIGNERS: list[tuple[Callable[[bytes], dict[str, str]], Callable[..., Verified | Refused]]] = [
    (_github, verify_github),
    (_standard, verify_standard),
    (_stripe, verify_stripe),
    (_slack, verify_slack),
]


@settings(max_examples=60, deadline=None)
@given(
    body=st.text(min_size=1, max_size=300), other=st.text(min_size=1, max_size=300), which=st.integers(0, 3)
)
def test_a_signed_body_verifies_and_any_other_body_is_refused(body: str, other: str, which: int) -> None:
    sign, verify = SIGNERS[which]
    headers = sign(body.encode())
    assert isinstance(verify(headers, body.encode(), SECRET, float(NOW)), Verified)
    if other != body:
        assert isinstance(verify(headers, other.encode(), SECRET, float(NOW)), Refused)


@settings(max_examples=30, deadline=None)
@given(skew=st.integers(301, 10**7), ahead=st.booleans(), which=st.integers(1, 3))
def test_a_signature_outside_five_minutes_is_refused(skew: int, ahead: bool, which: int) -> None:
    sign, verify = SIGNERS[which]  # GitHub signs no time: its replays are caught by X-GitHub-Delivery
    headers = sign(b'{"id": "evt_1"}')
    verdict = verify(headers, b'{"id": "evt_1"}', SECRET, float(NOW + (skew if ahead else -skew)))
    assert isinstance(verdict, Refused) and "from this host's clock" in verdict.reason


@given(header=st.text(max_size=200))
def test_any_signature_header_is_refused_without_an_error(header: str) -> None:
    for name in ("x-hub-signature-256", "stripe-signature", "x-slack-signature", "webhook-signature"):
        headers = {**_github(b"x"), **_standard(b"x"), **_stripe(b"x"), **_slack(b"x"), name: header}
        for _, verify in SIGNERS:
            verify(headers, b"x", SECRET, float(NOW))  # Verified or Refused: never an exception
