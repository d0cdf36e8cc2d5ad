"""A session's settings - model, approval, sandbox, compaction - as recorded with it
(`record.state.SessionSettings`) and as a host runs it (docs/serve.md): whichever host takes a session
over - `vibe serve`, the chat, `vibe run --session` - runs it with what the session recorded, not with
its own defaults. The person changes a setting for a session by choosing it for the process that hosts
it (`--approval`, `--sandbox`, `--model`, or their variables) or in the chat (/model, /compaction); a
host's own settings still hold where they are stricter (a project's config tightens, never loosens)."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Final, Literal, cast

from avibe.agent.compaction import compaction_names
from avibe.config import Settings
from avibe.config.values import APPROVAL_MODES, SANDBOX_MODES, stricter_approval, stricter_sandbox
from avibe.errors import StateError
from avibe.ports import RecordStore
from avibe.record.state import SessionSettings

log = logging.getLogger(__name__)

# The settings the person sets for one process by a flag, which sets the variable (avibe.cli.options).
PERSON_VARIABLES: Final = {"approval": "AVIBE_APPROVAL", "sandbox": "AVIBE_SANDBOX"}


def person_chose() -> frozenset[str]:
    """The settings the person chose for this process (a flag or its variable): they change the
    session's; `vibe serve` passes none (it hosts every session, and changes none of them)."""
    chosen = (name for name, variable in PERSON_VARIABLES.items() if os.environ.get(variable, "").strip())
    return frozenset(chosen)


def recorded_settings(store: RecordStore, session_id: str) -> SessionSettings:
    """What the session recorded; nothing (all fields empty) for a session from before it was recorded,
    or one whose document is damaged (logged: the host's own settings run it)."""
    try:
        return SessionSettings.from_stored(store.load_state(session_id, SessionSettings.KEY))
    except StateError as exc:
        log.warning("session %s: %s; its host's own settings run it", session_id, exc)
        return SessionSettings()


def in_force(settings: Settings, recorded: SessionSettings, chosen: frozenset[str] = frozenset()) -> Settings:
    """`settings` with the session's recorded approval and sandbox where they are stricter than this
    host's, except those the person `chosen` for this process (theirs hold, and are recorded)."""
    approval, sandbox = settings.approval, settings.sandbox
    if _takes("approval", recorded.approval, APPROVAL_MODES, chosen, stricter_approval, approval):
        approval = cast(Literal["auto", "ask"], recorded.approval)
    if _takes("sandbox", recorded.sandbox, SANDBOX_MODES, chosen, stricter_sandbox, sandbox):
        sandbox = recorded.sandbox
    return dataclasses.replace(settings, approval=approval, sandbox=sandbox)


def _takes(
    name: str, value: str, modes: tuple[str, ...], chosen: frozenset[str],
    stricter: Callable[[str, str], bool], own: str,
) -> bool:  # fmt: skip
    """The recorded `value` holds: the person chose none now, it is a mode, and no looser than `own`."""
    return name not in chosen and value in modes and stricter(value, own)


def recorded_compaction(recorded: SessionSettings, fallback: str) -> str:
    """The session's recorded way of making room, when the registry has it; else `fallback`."""
    if recorded.compaction and recorded.compaction not in compaction_names():
        log.warning("session compaction %r is unknown here; using %s", recorded.compaction, fallback)
    return recorded.compaction if recorded.compaction in compaction_names() else fallback


def record(store: RecordStore, session_id: str, settings: SessionSettings) -> None:
    store.save_state(session_id, SessionSettings.KEY, settings.to_dict())


def record_change(store: RecordStore, session_id: str, **fields: str) -> None:
    """One setting the person changed in a hosted session (the chat's /compaction), recorded."""
    now = dataclasses.replace(recorded_settings(store, session_id), **fields)
    record(store, session_id, now)


def session_model(settings: Settings, session_id: str) -> str:
    """The model a session recorded ("" when none), read only: `vibe chat` and `vibe run` resume a
    session on it unless the person names another (`--model`)."""
    from avibe.store import open_store

    with open_store(settings.database_url, read_only=True) as store:
        return recorded_settings(store, session_id).model
