"""The composition root: concrete adapters (store, model, tools, sandbox, sources, external programs)
built from Settings and handed to the host (`avibe.host.sessions`), which assembles the live session.
An edge (DESIGN's layers): the CLI, the chat and `vibe serve` call it; nothing below it imports it."""

from avibe.compose.backend import BackendSession, check_backend, open_backend_session, session_agent
from avibe.compose.common import SystemClock, open_record, sandbox_for, spawn_delegate
from avibe.compose.vibey import VibeySession, open_session

__all__ = [
    "BackendSession",
    "SystemClock",
    "VibeySession",
    "check_backend",
    "open_backend_session",
    "open_record",
    "open_session",
    "sandbox_for",
    "session_agent",
    "spawn_delegate",
]
