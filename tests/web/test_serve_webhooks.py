"""Callbacks from the services people already use (SPEC T1, docs/serve.md): each kind of callback feed
checks its service's own scheme. The services' documented example requests (payload, headers, secret
as their docs print them) and requests signed by their own SDKs are recorded (202); tampered, stale or
unsigned ones are 401 with nothing recorded; a redelivery is one entry; the tag names the service and
its event from the verified headers; handshakes are answered and recorded nowhere."""

from __future__ import annotations

import json
import time

import pytest
import stripe
from slack_sdk.signature import SignatureVerifier
from standardwebhooks.webhooks import Webhook
from webhook_support import post, recorded, serve_api, service_feed, workflow_run_failure

from avibe.host.agent import render_input
from avibe.record.sources import render_entry_text
from avibe.store import SqlStore

NOW = 1_800_000_000.0  # this host's clock where no documented example fixes it

# docs.github.com, "Validating webhook deliveries": the secret, payload and signature it prints.
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
GITHUB_DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"  # the delivery id of GitHub's header example


def _github(
    event: str = "push", delivery: str = GITHUB_DELIVERY, signature: str = GITHUB_SIGNATURE
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature,
        "User-Agent": "GitHub-Hookshot/044aadd",
        "Content-Type": "application/json",
    }


def test_githubs_documented_example_is_recorded_once_under_its_event(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "github", GITHUB_SECRET)
    api, _ = serve_api(sqlite_store, NOW)
    first = post(api, feed, "Hello, World!", _github())
    assert first.status_code == 202, first.text
    again = post(api, feed, "Hello, World!", _github())  # GitHub's "Redeliver": the same X-GitHub-Delivery
    assert again.status_code == 202 and again.json() == first.json() | {"duplicate": True}
    [entry] = recorded(sqlite_store, feed)
    assert entry.text == "Hello, World!" and entry.source.event == "github push"
    assert render_entry_text(entry).startswith(f'[Harness: callback "ci" ({feed.id}) · github push · ')


@pytest.mark.parametrize(
    ("body", "headers", "why"),
    [
        ("Hello, World?", _github(), "wrong X-Hub-Signature-256"),  # tampered body
        ("Hello, World!", _github(signature=GITHUB_SIGNATURE[:-1] + "f"), "wrong X-Hub-Signature-256"),
        ("Hello, World!", {"X-GitHub-Event": "push"}, "missing X-Hub-Signature-256"),
        ("Hello, World!", _github(event="push\u202e"), "X-GitHub-Event"),  # a header the body does not sign
        ("Hello, World!", _github(signature="sha256=é"), "wrong X-Hub-Signature-256"),  # not ASCII: no 500
    ],
)
def test_a_github_request_not_signed_with_the_secret_is_401_and_records_nothing(
    sqlite_store: SqlStore, body: str, headers: dict[str, str], why: str
) -> None:
    feed = service_feed(sqlite_store, "github", GITHUB_SECRET)
    api, _ = serve_api(sqlite_store, NOW)
    answer = post(api, feed, body, headers)
    assert answer.status_code == 401 and why in answer.json()["error"]
    assert recorded(sqlite_store, feed) == []


def test_githubs_ping_is_answered_and_recorded_nowhere(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "github", GITHUB_SECRET)
    api, _ = serve_api(sqlite_store, NOW)
    answer = post(api, feed, "Hello, World!", _github(event="ping"))
    assert answer.status_code == 200 and answer.json()["ping"] == "pong"
    assert recorded(sqlite_store, feed) == []
    assert post(api, feed, "Hello, World?", _github(event="ping")).status_code == 401  # a ping is signed too


def test_a_github_workflow_run_failure_reaches_the_session_as_a_digest_under_its_tag(
    sqlite_store: SqlStore,
) -> None:
    import hashlib
    import hmac

    feed = service_feed(sqlite_store, "github", GITHUB_SECRET)
    api, _ = serve_api(sqlite_store, NOW)
    body = workflow_run_failure()
    signature = "sha256=" + hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    answer = post(api, feed, body, _github("workflow_run", "d1f0e2c4-0000-11ef-8000-000000000001", signature))
    assert answer.status_code == 202
    assert api.fleet.woken == [feed.session]  # type: ignore[attr-defined]  # its session is woken
    [entry] = recorded(sqlite_store, feed)
    assert entry.text == body.decode()  # the record keeps every byte
    seen = render_input(entry).text  # what the session's agent gets, any backend (T3)
    tag, *lines = seen.splitlines()
    assert tag.startswith(f'[Harness: callback "ci" ({feed.id}) · github workflow_run · ')
    assert lines[:2] == ["│ github workflow_run", "│ action: completed"]
    for line in (
        "│ repository: octo-org/octo-repo",
        "│ workflow run: CI · completed · failure · branch main",
        "│ sender: octocat",
        "│ url: https://github.com/octo-org/octo-repo/actions/runs/30433642",
    ):
        assert line in lines
    assert f"all of it is #{entry.seq} in the record" in lines[-1]
    assert len(seen) < 800 < len(body) // 10  # a digest, not the 10 KB body


# docs.slack.dev, "Verifying requests from Slack": the signing secret, slash-command body, timestamp and
# signature its walk-through prints.
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_AT = 1531420618
SLACK_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def _slack(at: int, signature: str) -> dict[str, str]:
    return {"X-Slack-Request-Timestamp": str(at), "X-Slack-Signature": signature}


def test_slacks_documented_example_is_recorded_and_a_stale_or_tampered_one_is_401(
    sqlite_store: SqlStore,
) -> None:
    feed = service_feed(sqlite_store, "slack", SLACK_SECRET)
    api, clock = serve_api(sqlite_store, SLACK_AT + 10)
    assert post(api, feed, SLACK_BODY + "x", _slack(SLACK_AT, SLACK_SIGNATURE)).status_code == 401
    answer = post(api, feed, SLACK_BODY, _slack(SLACK_AT, SLACK_SIGNATURE))
    assert answer.status_code == 202
    assert (
        post(api, feed, SLACK_BODY, _slack(SLACK_AT, SLACK_SIGNATURE)).json()["duplicate"] is True
    )  # replay
    clock.at = SLACK_AT + 301  # past Slack's five minutes
    stale = post(api, feed, SLACK_BODY, _slack(SLACK_AT, SLACK_SIGNATURE))
    assert stale.status_code == 401 and "from this host's clock" in stale.json()["error"]
    [entry] = recorded(sqlite_store, feed)
    assert entry.source.event == "slack"


def test_slacks_url_verification_and_an_event_signed_by_slack_sdk(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "slack", SLACK_SECRET)
    api, _ = serve_api(sqlite_store, time.time())
    signer = SignatureVerifier(SLACK_SECRET)  # Slack's SDK signs as Slack does
    at = str(int(time.time()))

    def signed(body: str) -> dict[str, str]:
        return _slack(int(at), signer.generate_signature(timestamp=at, body=body) or "")

    check = json.dumps(
        {
            "token": "x",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        }
    )
    answer = post(api, feed, check, signed(check))
    assert answer.status_code == 200 and answer.json() == {
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    }
    assert recorded(sqlite_store, feed) == []
    event = json.dumps(
        {
            "type": "event_callback",
            "event_id": "Ev08MFMKH6",
            "event": {"type": "app_mention", "text": "deploy?"},
        }
    )
    assert post(api, feed, event, signed(event)).status_code == 202
    retry = {**signed(event), "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    assert post(api, feed, event, retry).json()["duplicate"] is True  # Slack's retry: the same event_id
    assert len(recorded(sqlite_store, feed)) == 1


# The Standard Webhooks specification's example (also the one Svix documents): secret, id, timestamp,
# payload and signature as printed.
SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_AT = 1614265330
SW_HEADERS = {
    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "webhook-timestamp": str(SW_AT),
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
SW_BODY = '{"test": 2432232314}'


def test_standard_webhooks_documented_example_once_then_stale(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "standard-webhooks", SW_SECRET)
    api, clock = serve_api(sqlite_store, SW_AT + 5)
    assert post(api, feed, SW_BODY.replace("2", "3"), SW_HEADERS).status_code == 401  # tampered
    assert post(api, feed, SW_BODY, SW_HEADERS).status_code == 202
    assert post(api, feed, SW_BODY, SW_HEADERS).json()["duplicate"] is True  # the same webhook-id
    clock.at = SW_AT - 301
    assert post(api, feed, SW_BODY, SW_HEADERS).status_code == 401  # too far ahead of this clock
    other = {**SW_HEADERS, "webhook-id": "msg_2"}  # a new id breaks the signature: no way round the key
    assert post(api, feed, SW_BODY, other).status_code == 401
    [entry] = recorded(sqlite_store, feed)
    assert entry.source.event == "standard-webhooks" and entry.text == SW_BODY


def test_standard_webhooks_signed_by_its_library_with_two_signatures(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "standard-webhooks", SW_SECRET)
    now = time.time()
    api, _ = serve_api(sqlite_store, now)
    from datetime import UTC, datetime

    body = json.dumps({"type": "invoice.paid", "timestamp": "2026-12-06T16:00:00Z", "data": {"id": "in_1"}})
    signature = Webhook(SW_SECRET).sign("msg_live_1", datetime.fromtimestamp(int(now), UTC), body)
    old = Webhook("whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUE=").sign(
        "msg_live_1", datetime.fromtimestamp(int(now), UTC), body
    )
    headers = {
        "webhook-id": "msg_live_1",
        "webhook-timestamp": str(int(now)),
        "webhook-signature": f"{old} {signature}",
    }
    assert post(api, feed, body, headers).status_code == 202  # a sender rotating its secret signs twice


STRIPE_SECRET = "whsec_test_8ZyxJ2ePvLN4Hs0k1uQ7rW"
STRIPE_EVENT = json.dumps(
    {
        "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy",
        "object": "event",
        "api_version": "2026-11-17",
        "created": 1686089970,
        "data": {
            "object": {
                "id": "pi_3NG8Dt2eZvKYlo2C0XGx2Q3x",
                "object": "payment_intent",
                "amount": 2000,
                "currency": "usd",
                "status": "succeeded",
            }
        },
        "livemode": False,
        "type": "payment_intent.succeeded",
    }
)


def test_stripe_signed_by_stripes_sdk_is_recorded_once_by_its_event_id(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "stripe", STRIPE_SECRET)
    now = int(time.time())
    api, clock = serve_api(sqlite_store, now)
    header = stripe.WebhookSignature.generate_signature_header(STRIPE_EVENT, STRIPE_SECRET, timestamp=now)
    assert post(api, feed, STRIPE_EVENT, {"Stripe-Signature": header}).status_code == 202
    later = stripe.WebhookSignature.generate_signature_header(STRIPE_EVENT, STRIPE_SECRET, timestamp=now + 60)
    clock.at = now + 60  # Stripe's retry of the same event, signed anew: one entry
    assert post(api, feed, STRIPE_EVENT, {"Stripe-Signature": later}).json()["duplicate"] is True
    assert post(api, feed, STRIPE_EVENT.replace("2000", "1"), {"Stripe-Signature": later}).status_code == 401
    clock.at = now + 400
    assert post(api, feed, STRIPE_EVENT, {"Stripe-Signature": header}).status_code == 401  # stale
    assert post(api, feed, STRIPE_EVENT, {}).status_code == 401
    [entry] = recorded(sqlite_store, feed)
    assert entry.source.event == "stripe"
    # What we accept, Stripe's own verifier accepts (the scheme is Stripe's, not a look-alike).
    assert stripe.WebhookSignature.verify_header(STRIPE_EVENT, header, STRIPE_SECRET, tolerance=None)


# docs.gitlab.com, "Webhook events": a push, with the headers GitLab sends and the secret token set.
GITLAB_TOKEN = "gitlab-secret-token-1234"
GITLAB_PUSH = json.dumps(
    {
        "object_kind": "push",
        "event_name": "push",
        "ref": "refs/heads/master",
        "user_username": "jsmith",
        "project": {"path_with_namespace": "mike/diaspora", "web_url": "http://example.com/mike/diaspora"},
        "total_commits_count": 4,
    }
)


def _gitlab(token: str = GITLAB_TOKEN, key: str = "908a6d9e-45fd-46c8-97e6-c4f350f219dd") -> dict[str, str]:
    return {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": token, "Idempotency-Key": key}


def test_gitlab_push_with_its_token_once_by_idempotency_key(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "gitlab", GITLAB_TOKEN)
    api, _ = serve_api(sqlite_store, NOW)
    assert post(api, feed, GITLAB_PUSH, _gitlab(token=GITLAB_TOKEN[:-1])).status_code == 401
    assert post(api, feed, GITLAB_PUSH, {"X-Gitlab-Event": "Push Hook"}).status_code == 401
    assert post(api, feed, GITLAB_PUSH, _gitlab()).status_code == 202
    assert post(api, feed, GITLAB_PUSH, _gitlab()).json()["duplicate"] is True  # GitLab's retry
    [entry] = recorded(sqlite_store, feed)
    assert entry.source.event == "gitlab push hook"


def test_an_avibe_callback_is_unchanged_and_names_no_event(sqlite_store: SqlStore) -> None:
    feed = service_feed(sqlite_store, "avibe", "an-avibe-secret-of-24ch")
    api, _ = serve_api(sqlite_store, NOW)
    assert post(api, feed, "build 881 is green", _github()).status_code == 401  # another scheme: no
    answer = post(api, feed, "build 881 is green", {"Authorization": "Bearer an-avibe-secret-of-24ch"})
    assert answer.status_code == 202
    [entry] = recorded(sqlite_store, feed)
    assert entry.source.event == "" and " · github" not in render_entry_text(entry)
