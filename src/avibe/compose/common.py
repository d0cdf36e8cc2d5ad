"""What every hosted session is built from, whichever agent works in it: the clock, the record, the
sandbox, the session's watches and timers, and a process of its own for a delegated session."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from avibe.checkpoint.stated import StatedBan, stated_bans
from avibe.config import Settings, load_settings, user_config_file
from avibe.errors import UnknownSession
from avibe.host.sessions import HostPorts
from avibe.ports import Clock, FeedStore, RecordStore
from avibe.record.entries import EntryQuery

if TYPE_CHECKING:  # the adapters are imported where they are built: `vibe --help` loads none of them
    from avibe.sources.feeds import FeedRunner
    from avibe.tools.sandbox import SandboxPolicy

log = logging.getLogger("avibe.compose")


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def open_record(settings: Settings) -> RecordStore:
    from avibe.store import open_store

    settings.home.mkdir(parents=True, exist_ok=True)
    return open_store(settings.database_url)


def check_sandbox(settings: Settings, workdir: Path) -> None:
    """Before anything is written: refused (UnsafeLayout) where the sandbox cannot keep Avibe's files -
    its home, the user's config folder, the database - out of the agent's reach."""
    from avibe.tools.sandbox import check_layout

    check_layout(
        settings.sandbox,
        workdir,
        home=settings.home,
        config_dir=user_config_file().parent,
        database_url=settings.database_url,
        kept=kept_paths(settings, workdir),
        real_home=real_home(),
    )


def real_home() -> Path:
    """The person's own home (the sandbox gives commands another one)."""
    return Path(os.path.expanduser("~"))


def kept_paths(settings: Settings, workdir: Path) -> tuple[Path, ...]:
    """What the next start runs or trusts: Avibe's interpreter, the shell's startup files, the
    model cache and where its verification is recorded, and each trusted project's `.avibe/` - read-only
    to the shell and refused by the file tools in the sandboxed modes."""
    from avibe.providers.modelfile import records_dir
    from avibe.tools.reach import kept_paths as runs_at_start

    trusted = [folder / ".avibe" for folder in settings.trusted_projects]
    records = (records_dir(settings.home), records_dir())  # the second: where the providers look by default
    return (*runs_at_start(real_home(), settings.model_cache, workdir), *records, *trusted)


def stated_rules(store: RecordStore, session_id: str) -> Callable[[], tuple[StatedBan, ...]]:
    """The paths the person's own messages forbid changing (avibe/checkpoint/stated.py), in the session and
    in the sessions that delegated its work (a delegated run works in the same folder, under the rules
    the person gave where they delegated it), read from the record at each call, so a message sent a
    moment ago counts. Only entries whose stored kind is the user's are read (N7): nothing a tool, a
    watch or another agent wrote can set or lift one."""

    def read() -> tuple[StatedBan, ...]:
        bans: list[StatedBan] = []
        for depth, session in enumerate(_delegating_chain(store, session_id)):
            said = store.query(EntryQuery(session, kinds=frozenset({"user"})))
            found = stated_bans((entry.seq, entry.text) for entry in said)
            bans += [replace(ban, session=session) if depth else ban for ban in found]
        return tuple(bans)

    return read


MAX_DELEGATION_DEPTH: Final = 8  # a chain this long is a loop or a runaway; the bans found so far hold


def _delegating_chain(store: RecordStore, session_id: str) -> list[str]:
    """The session, the one that delegated it, that one's delegator ...: a delegated session's first entry
    is the task, an `agent` input whose ref is the delegating session (avibe/sources/delegations.py)."""
    chain = [session_id]
    while len(chain) < MAX_DELEGATION_DEPTH:
        first = store.query(EntryQuery(chain[-1], seq_to=1))
        ref = first[0].source.ref if first and first[0].kind == "agent" else ""
        if not ref or ref in chain:
            break
        try:
            store.get_session(ref)
        except UnknownSession:
            break
        chain.append(ref)
    return chain


def sandbox_for(settings: Settings, workdir: Path, store: RecordStore, session_id: str) -> SandboxPolicy:
    """The sandbox a session's tools work in (the shell tool's, the file tools', a command watch's):
    Avibe's home, the user's config folder and the database out of the agent's reach, the
    person's deny rules and stated bans read-only, no network and no host sockets unless the person's own
    settings open them, and what the next start runs or trusts read-only."""
    from avibe.tools.sandbox import SandboxPolicy

    return SandboxPolicy.for_record(
        settings.sandbox,
        workdir,
        home=settings.home,
        database_url=settings.database_url,
        protected=settings.deny,
        config_dir=user_config_file().parent,
        stated=stated_rules(store, session_id),
        network=settings.network,
        host_sockets=settings.host_sockets,
        kept=kept_paths(settings, workdir),
        real_home=real_home(),
    )


def feeds_for(
    store: RecordStore, ports: HostPorts, clock: Clock, settings: Settings, workdir: Path
) -> FeedRunner:
    """The session's watches and timers, run by its host whatever agent works in it: what they
    post goes through the host's delivery port with its key; a queued feed's input waits for a turn."""
    from avibe.sources.feeds import FeedRunner

    return FeedRunner(
        cast("FeedStore", store),
        ports.session_id,
        ports.post_keyed,
        clock,
        policy=sandbox_for(settings, workdir, store, ports.session_id),
    )


def spawn_delegate(session_id: str) -> None:
    """Run a delegated session in a process of its own (`vibe serve --session S --exit-when-idle`), with
    this process's settings (environment) and its output in Avibe's log dir."""
    settings = load_settings()
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.log_dir / f"delegate-{session_id}.log"
    argv = [sys.executable, "-m", "avibe", "serve", "--session", session_id, "--exit-when-idle"]
    with log_path.open("ab") as output:
        subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    log.info("delegated session %s runs in its own process (log: %s)", session_id, log_path)
