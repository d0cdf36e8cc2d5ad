"""Issue 32: the demo's 1.5B sent its news to `s-20261201-ab12cd`, the example id in send_to_session's
description, until the turn ran out - the description gives no id to copy."""

from __future__ import annotations

import re

from avibe.tools.sessions import SendToSession


def test_the_description_offers_no_session_id_to_copy() -> None:
    spec = SendToSession(lambda to, text: (_ for _ in ()).throw(AssertionError("not called"))).spec
    assert not re.search(r"s-\d{8}-[0-9a-f]{6}", spec.description)
    assert "never a guessed one" in spec.description
