"""the demo's 1.5B sent its news to `s-20261201-ab12cd`, the example id in send_to_session's
description, until the turn ran out - the description gives no id to copy."""

from __future__ import annotations

import re
from pathlib import Path

from avibe.compose.common import SystemClock
from avibe.host.sessions import post_to
from avibe.record.entries import Source
from avibe.store.open import open_store
from avibe.tools.sessions import SendToSession


def test_the_description_offers_no_session_id_to_copy() -> None:
    spec = SendToSession(lambda to, text: (_ for _ in ()).throw(AssertionError("not called"))).spec
    assert not re.search(r"s-\d{8}-[0-9a-f]{6}", spec.description)
    assert "never a guessed one" in spec.description


def test_an_unknown_session_gets_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    """The demo's 1.5B sent to "deploy-bot" (a watch's name) again and again on "no session ... in the
    record": the error now says nothing was sent, what a watch's name is, and not to send again - and the
    record gets no entry."""
    with open_store(f"sqlite:///{tmp_path / 'record.db'}") as store:
        post = post_to(store, SystemClock())
        tool = SendToSession(lambda to, text: post(to, Source("agent", "vibey", "s-a"), text))
        result = tool.run({"session": "deploy-bot", "text": "I have updated the plan"})
        assert result.is_error
        assert "there is no session 'deploy-bot'; nothing was sent" in result.output
        assert "watch" in result.output and "Do not send this again" in result.output
        assert store.list_sessions() == []
