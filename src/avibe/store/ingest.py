"""`append_each` (docs/serve.md): many independent appends of `vibe serve`'s ingest writer in one
transaction, an outcome for each - stored only while the feed each was checked against is unchanged.

PostgreSQL: each transaction commits without waiting for its WAL flush, so the session rows it locked
are free for the next batch (another host's) at once; one flush then covers them all before any outcome
is given (docs/bench-ingest.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from sqlalchemy.engine import Connection

from avibe.errors import StoreError, StoreUnavailable
from avibe.record.entries import Entry, NewEntry
from avibe.record.feeds import Feed
from avibe.store.checks import check_new_entry
from avibe.store.core import _COMMIT_WITHOUT_FLUSH
from avibe.store.entries import Entries
from avibe.store.feeds import FEEDS_NAMED, feed_of


class FeedChanged(StoreError):
    """A feed was stopped or changed after a request was checked against it (`append_each`): check the
    request again against the feed as it is now."""


@dataclasses.dataclass(frozen=True, slots=True)
class Appended:
    """One append's outcome in `append_each`: its entry (`repeat`: recorded before under its delivery
    key), or the error that refused it."""

    entry: Entry | None = None
    repeat: bool = False
    error: BaseException | None = None


def _same_feed(now: Feed | None, checked: Feed) -> bool:
    """Whether the feed as stored now is the one a request was checked against (live, same spec and wake)."""
    return (
        now is not None
        and now.removed_at is None
        and now.kind == checked.kind
        and now.session == checked.session
        and now.spec == checked.spec
        and now.wake == checked.wake
    )


class Ingest(Entries):
    """Appends that each get their own outcome (`vibe serve`'s ingest writer)."""

    def append_each(
        self,
        new: Sequence[NewEntry],
        *,
        feeds: Mapping[str, Feed] | None = None,
        quiet: Sequence[bool] = (),
    ) -> list[Appended]:
        """Append each entry on its own account - in one transaction while none fails - and give each its
        outcome: its entry (the earlier one, `repeat`, when its delivery key was recorded before) or the
        error that refused it alone (an unknown session). `feeds`: feed id -> the feed an entry's request
        was checked against (its secret, limits, wake); an entry whose source names one is stored only
        while that feed is, in this transaction, still live and unchanged, else it gets FeedChanged.
        `quiet[i]`: entry i wakes no host (no NOTIFY for it)."""
        outcomes: list[Appended | None] = [None] * len(new)
        valid: list[int] = []
        for i, entry in enumerate(new):
            try:
                check_new_entry(entry)
            except (TypeError, ValueError) as exc:
                outcomes[i] = Appended(error=exc)
            else:
                valid.append(i)
        # PostgreSQL: each transaction commits without waiting for its WAL flush, so the session rows it
        # locked are free for the next batch (another host's) at once, instead of after a disk flush
        # (docs/bench-ingest.md: three hosts' batches queued on the same rows, a flush each); one flush
        # then covers them all before any outcome is given (202 still means the input is on disk).
        early = self._early_release
        work = partial(self._append_each_in, new=new, feeds=feeds or {}, quiet=quiet, early=early)
        self._append_valid(work, valid, outcomes)
        stored = [i for i, outcome in enumerate(outcomes) if outcome is not None and outcome.entry]
        if early and stored:
            try:
                self._wait_for_flush()
            except StoreError as exc:  # committed, perhaps not on disk: nobody is told it was recorded
                for i in stored:
                    outcomes[i] = Appended(error=exc)
        return [
            outcome if outcome is not None else Appended(error=StoreError("not appended"))
            for outcome in outcomes
        ]

    def _append_valid(
        self,
        work: Callable[..., dict[int, Appended]],
        valid: list[int],
        outcomes: list[Appended | None],
    ) -> None:
        """All of `valid` in one transaction; if it is refused before commit, each on its own."""
        if len(valid) > 1:
            try:
                together = self._write(partial(work, only=valid))
            except StoreUnavailable as exc:  # away (a commit may have been cut off): each gets the error
                for i in valid:
                    outcomes[i] = Appended(error=exc)
                return
            except Exception:  # refused before commit (an unknown session): each alone, its own outcome
                pass
            else:
                for i, outcome in together.items():
                    outcomes[i] = outcome
                return
        for i in valid:
            try:
                outcomes[i] = self._write(partial(work, only=[i]))[i]
            except Exception as exc:  # handed to the caller that made this append
                outcomes[i] = Appended(error=exc)

    def _append_each_in(
        self,
        conn: Connection,
        new: Sequence[NewEntry],
        only: Sequence[int],
        feeds: Mapping[str, Feed],
        quiet: Sequence[bool],
        early: bool = False,
    ) -> dict[int, Appended]:
        if early:  # PostgreSQL: this transaction's commit does not wait for the disk (see append_each)
            conn.execute(_COMMIT_WITHOUT_FLUSH)
        outcomes: dict[int, Appended] = {}
        named = sorted({new[i].source.ref for i in only if new[i].source.ref in feeds})
        if named:
            current = {row.id: feed_of(row) for row in conn.execute(FEEDS_NAMED, {"ids": named})}
            for i in only:
                ref = new[i].source.ref
                if ref in feeds and not _same_feed(current.get(ref), feeds[ref]):
                    outcomes[i] = Appended(error=FeedChanged(f"the feed {ref!r} changed since it was read"))
        keep = [i for i in only if i not in outcomes]
        if keep:
            repeats: list[bool] = []
            stored = self._append_in(
                conn, [new[i] for i in keep], repeats, [bool(quiet and quiet[i]) for i in keep]
            )
            for i, entry, repeat in zip(keep, stored, repeats, strict=True):
                outcomes[i] = Appended(entry=entry, repeat=repeat)
        return outcomes
