"""The digest a model sees of a long callback body of each service (SPEC T1, docs/serve.md): the few
fields an agent acts on, one short line each, and where the whole body is; a short body, an unknown
service or a body that is not a JSON object is shown whole."""

from __future__ import annotations

import json

from avibe.record.digests import DIGEST_OVER_CHARS, digest

PAD = {"padding": "x" * DIGEST_OVER_CHARS}  # what makes a real payload long: fields no agent needs


def _long(payload: dict[str, object]) -> str:
    return json.dumps({**payload, **PAD})


def test_a_gitlab_merge_request_digest() -> None:
    body = _long(
        {
            "object_kind": "merge_request",
            "user": {"username": "root"},
            "project": {
                "path_with_namespace": "gitlabhq/gitlab-test",
                "web_url": "http://example.com/gitlabhq/gitlab-test",
            },
            "object_attributes": {
                "iid": 1,
                "title": "MS-Viewport",
                "state": "opened",
                "action": "open",
                "url": "http://example.com/diaspora/merge_requests/1",
            },
        }
    )
    lines = (digest("gitlab merge request hook", body, 4) or "").splitlines()
    assert lines[0] == "gitlab merge request hook"
    for line in (
        "kind: merge_request",
        "project: gitlabhq/gitlab-test",
        "merge request: #1 MS-Viewport",
        "state: opened · open",
        "user: root",
        "url: http://example.com/diaspora/merge_requests/1",
    ):
        assert line in lines
    assert "#4 in the record" in lines[-1]


def test_stripe_and_slack_digests_name_the_bodys_event_type() -> None:
    stripe = _long(
        {
            "id": "evt_1",
            "type": "invoice.payment_failed",
            "livemode": False,
            "data": {
                "object": {
                    "object": "invoice",
                    "id": "in_1",
                    "status": "open",
                    "amount": 500,
                    "currency": "eur",
                }
            },
        }
    )
    assert "type: invoice.payment_failed" in (digest("stripe", stripe, 2) or "")
    assert "amount: 500 eur" in (digest("stripe", stripe, 2) or "")
    slack = _long(
        {
            "type": "event_callback",
            "team_id": "T1",
            "event": {"type": "app_mention", "channel": "C1", "user": "U1", "text": "is CI red?"},
        }
    )
    assert "type: event_callback / app_mention" in (digest("slack", slack, 3) or "")
    assert "text: is CI red?" in (digest("slack", slack, 3) or "")


def test_what_is_shown_whole() -> None:
    assert digest("github push", json.dumps({"ref": "refs/heads/main"}), 1) is None  # short
    assert digest("github push", "[" * (DIGEST_OVER_CHARS + 1), 1) is None  # not JSON
    assert digest("github push", json.dumps(["x" * DIGEST_OVER_CHARS]), 1) is None  # not an object
    assert digest("bitbucket push", _long({"ref": "x"}), 1) is None  # no such service


def test_a_field_is_one_short_line_whatever_the_body_holds() -> None:
    title = "Fix\nthe [Harness: parser]\n" + "y" * 500
    body = _long({"action": "opened", "pull_request": {"number": 7, "title": title}})
    [line] = [
        line
        for line in (digest("github pull_request", body, 1) or "").splitlines()
        if line.startswith("pull")
    ]
    assert line.startswith("pull request: #7 Fix the [Harness: parser] y") and len(line) < 200
