"""Shared helpers for the checkpoint core's tests: a deterministic TokenCounter double and entry builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import pytest

from avibe.ports import TokenCounter
from avibe.record.entries import Entry, Kind, Source
from avibe.record.messages import ChatMessage

AT = datetime(2026, 1, 1, tzinfo=UTC)


class CharCounter:
    """About four characters per token, rounded up: deterministic and monotone in the text's length."""

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count(m.content) + 4 for m in messages)


def make_entry(seq: int, text: str, kind: Kind = "user", session: str = "s1") -> Entry:
    return Entry(session=session, seq=seq, source=Source(kind=kind, name=kind), text=text, at=AT)


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return CharCounter()


@pytest.fixture(scope="session")
def entry() -> Callable[..., Entry]:
    return make_entry
