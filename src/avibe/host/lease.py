"""One writer per session: the hosting process holds the session's lease for as long
as it hosts it. The store decides who holds it; this module keeps it alive and lets it go."""

from __future__ import annotations

import logging
import threading
from typing import Final

from avibe.errors import AvibeError
from avibe.ports import Lease, LeaseOwner, RecordStore

# The lease lives LEASE_TTL_S past its last heartbeat, and the heartbeat renews it every LEASE_BEAT_S.
# On this machine a dead holder's lease is taken over at once; from another machine (a shared
# PostgreSQL) after LEASE_TTL_S.
LEASE_TTL_S: Final = 60.0
LEASE_BEAT_S: Final = 10.0
log = logging.getLogger("avibe.host")


class LeaseKeeper:
    """Holds a session's lease while this process hosts it: a daemon thread renews it every `beat_s`
    seconds (model calls may take minutes; the heartbeat must not wait for them), `close` releases it.
    A lease found taken over (this process was stalled past its expiry) is logged; `lost` says so."""

    def __init__(self, store: RecordStore, lease: Lease, *, ttl_s: float, beat_s: float) -> None:
        self.store, self.lease, self.ttl_s, self.beat_s = store, lease, ttl_s, beat_s
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.session}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.beat_s):
            try:
                renewed = self.store.renew_lease(self.lease, ttl_s=self.ttl_s)
            except AvibeError as exc:  # the database is busy or away: try again at the next beat
                log.warning("session %s: could not renew its lease: %s", self.lease.session, exc)
                continue
            if renewed is None:
                self.lost = True
                log.error(
                    "session %s: its lease was taken over by another process while this one (pid %d) "
                    "hosted it; this process stalled past the lease's expiry",
                    self.lease.session,
                    self.lease.owner.pid,
                )
                return
            self.lease = renewed

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        if self.lost:
            return
        try:
            self.store.release_lease(self.lease)
        except AvibeError as exc:  # it expires on its own; the next run takes it over then
            log.warning("session %s: could not release its lease: %s", self.lease.session, exc)


def hold_lease(store: RecordStore, session_id: str, owner: LeaseOwner) -> LeaseKeeper:
    """`owner` (this process) becomes the session's one writer, or SessionHosted says who is (nothing
    written). A stale lease (its process gone, or its heartbeat expired) is taken over, with a log line."""
    grant = store.acquire_lease(session_id, owner, ttl_s=LEASE_TTL_S)
    if grant.replaced is not None:
        old = grant.replaced.owner
        log.warning(
            "session %s: took over the lease of pid %d on %s (held since %s): %s",
            session_id,
            old.pid,
            old.host,
            grant.replaced.acquired_at.isoformat(),
            grant.reason,
        )
    return LeaseKeeper(store, grant.lease, ttl_s=LEASE_TTL_S, beat_s=LEASE_BEAT_S)
