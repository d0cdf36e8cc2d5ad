"""Feeds: the standing sources that post into a session on their own time (SPEC T1).

A feed is a watch (a command's output, a file or a URL, checked every so often: it posts when what it
sees changes), a timer (once at a time, every interval, or on a cron schedule: it posts its text) or a
callback (an HTTP endpoint with a secret: it posts the body it is sent). Each input a feed delivers is
recorded with `Source(kind, name, ref=<feed id>)` and tagged by the harness from those fields (T1).

Values only: the store keeps feeds (migration 0004), the adapters in `avibe/sources` run them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, get_args

FeedKind = Literal["watch", "timer", "callback"]
FEED_KINDS: Final[tuple[FeedKind, ...]] = get_args(FeedKind)
ID_PREFIX: Final[dict[FeedKind, str]] = {"watch": "w", "timer": "t", "callback": "cb"}
# How a callback proves its sender: Avibe's own secret or signature, or the scheme of the service that
# posts it as it is (avibe.web.webhooks); its spec's "kind", "avibe" when absent (feeds made before).
CallbackKind = Literal["avibe", "github", "gitlab", "standard-webhooks", "stripe", "slack"]
CALLBACK_KINDS: Final[tuple[CallbackKind, ...]] = get_args(CallbackKind)


@dataclass(frozen=True, slots=True)
class Feed:
    """One feed as stored. `spec` says what it watches or when it fires (plain JSON, kind-specific, checked
    by `avibe.sources.feeds.check_spec`); `wake` says whether an input it posts while the agent is idle
    starts a turn (True) or waits for the next one (False, "queue"); `state` is the feed's own progress
    (a watch's last digest, a timer's last fire), kept so a restart neither repeats nor skips."""

    id: str
    session: str
    kind: FeedKind
    name: str
    spec: dict[str, Any]
    wake: bool = True
    state: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    removed_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.removed_at is None
