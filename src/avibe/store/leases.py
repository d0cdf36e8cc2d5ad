"""Session leases in the SQL store (docs/serve.md): one writer per session. A lease names its owner (host,
pid, a random token, the machine's PID namespace) and expires unless renewed; a stale one (expired, or
its process gone from this machine) is taken over."""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from avibe.errors import SessionHosted
from avibe.ports import Lease, LeaseGrant, LeaseOwner
from avibe.store.checks import check_aware, check_text
from avibe.store.core import AnyRow, SqlCore
from avibe.store.schema import session_leases


class Leases(SqlCore):
    """Acquiring, renewing and releasing a session's lease."""

    def acquire_lease(self, session_id: str, owner: LeaseOwner, *, ttl_s: float) -> LeaseGrant:
        """Make `owner` the session's one writer for `ttl_s` seconds (renew it before then). A lease of
        another owner that is live raises SessionHosted and changes nothing; a stale one (expired, or
        its process gone on this machine) is taken over and returned as `replaced`. Atomic across
        processes: the session row is locked as for an append."""
        _check_owner(owner)
        _check_ttl(ttl_s)

        def work(conn: Connection) -> LeaseGrant:
            self._lock_session(conn, session_id)
            now = self._now()
            check_aware("clock time", now)
            row = conn.execute(select(session_leases).where(session_leases.c.session == session_id)).first()
            held = None if row is None else _lease(row)
            replaced, reason = None, ""
            if held is not None and held.owner.token != owner.token:
                reason = lease_stale_reason(held, now)
                if not reason:
                    since = held.acquired_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
                    raise SessionHosted(session_id, held.owner.pid, held.owner.host, since)
                replaced = held
            acquired = now if held is None or replaced is not None else held.acquired_at
            lease = Lease(session_id, owner, acquired, now, now + timedelta(seconds=ttl_s))
            values = _lease_values(lease)
            if row is None:
                conn.execute(insert(session_leases).values(session=session_id, **values))
            else:
                conn.execute(
                    update(session_leases).where(session_leases.c.session == session_id).values(**values)
                )
            return LeaseGrant(_utc_lease(lease), replaced, reason)

        return self._write(work)

    def renew_lease(self, lease: Lease, *, ttl_s: float) -> Lease | None:
        """The heartbeat: extend a lease this owner still holds; None when it is held no longer (released,
        or taken over after it went stale)."""
        _check_ttl(ttl_s)

        def work(conn: Connection) -> Lease | None:
            self._lock_session(conn, lease.session)
            now = self._now()
            renewed = dataclasses.replace(lease, renewed_at=now, expires_at=now + timedelta(seconds=ttl_s))
            changed = conn.execute(
                update(session_leases)
                .where(_held_by(lease))
                .values(renewed_at=renewed.renewed_at, expires_at=renewed.expires_at)
            )
            return _utc_lease(renewed) if changed.rowcount else None

        return self._write(work)

    def release_lease(self, lease: Lease) -> None:
        """Give the session up (on close); a lease no longer held is left to its new owner."""
        self._write(lambda conn: conn.execute(delete(session_leases).where(_held_by(lease))))

    def session_lease(self, session_id: str) -> Lease | None:
        """The session's lease as stored (live or stale), or None when nobody holds it."""
        with self._reading() as conn:
            self._require_session(conn, session_id)
            row = conn.execute(select(session_leases).where(session_leases.c.session == session_id)).first()
        return None if row is None else _lease(row)


def this_machine() -> str:
    """This machine's name plus its PID namespace: two processes with the same value see the same pids."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}|{namespace}"[:255]


def lease_owner() -> LeaseOwner:
    """This process as a lease owner, with a fresh random token."""
    return LeaseOwner(socket.gethostname()[:255], os.getpid(), secrets.token_hex(16), this_machine())


def pid_running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def lease_stale_reason(lease: Lease, now: datetime) -> str:
    """Why the lease no longer protects its session ("" while it does): its heartbeat expired, or its
    process is gone from this machine (known only where its pid means that process)."""
    if lease.expires_at <= now:
        return f"its last heartbeat was at {lease.renewed_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    if lease.owner.machine == this_machine() and not pid_running(lease.owner.pid):
        return f"its process {lease.owner.pid} on {lease.owner.host} is gone"
    return ""


def _check_owner(owner: LeaseOwner) -> None:
    for field, value in (
        ("lease host", owner.host),
        ("lease token", owner.token),
        ("lease machine", owner.machine),
    ):
        check_text(field, value)
    if not 0 < len(owner.token) <= 64:
        raise ValueError(f"lease token must be 1-64 characters, got {len(owner.token)}")
    if len(owner.host) > 255 or len(owner.machine) > 255:
        raise ValueError("lease host and machine must be at most 255 characters")
    if owner.pid <= 0:
        raise ValueError(f"lease pid must be positive, got {owner.pid}")


def _check_ttl(ttl_s: float) -> None:
    if not 0 < ttl_s <= 86_400:
        raise ValueError(f"lease time to live must be 0-86,400 seconds, got {ttl_s}")


def _held_by(lease: Lease) -> ColumnElement[bool]:
    return and_(session_leases.c.session == lease.session, session_leases.c.token == lease.owner.token)


def _lease(row: AnyRow) -> Lease:
    owner = LeaseOwner(row.host, row.pid, row.token, row.machine)
    return Lease(row.session, owner, row.acquired_at, row.renewed_at, row.expires_at)


def _utc_lease(lease: Lease) -> Lease:
    return dataclasses.replace(
        lease,
        acquired_at=lease.acquired_at.astimezone(UTC),
        renewed_at=lease.renewed_at.astimezone(UTC),
        expires_at=lease.expires_at.astimezone(UTC),
    )


def _lease_values(lease: Lease) -> dict[str, object]:
    owner = lease.owner
    return {"token": owner.token, "host": owner.host, "machine": owner.machine, "pid": owner.pid,
            "acquired_at": lease.acquired_at, "renewed_at": lease.renewed_at,
            "expires_at": lease.expires_at}  # fmt: skip
