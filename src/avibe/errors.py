"""The harness's exceptions. Each carries a message that says what to do.

AvibeError
 +-- ConfigError            bad setting or environment (names the setting)
 +-- StoreError             the record database
 |    +-- StoreUnavailable  cannot connect / open
 |    |    +-- NoRecord      read-only open of a database that holds no record yet
 |    +-- UnknownSession    no such session
 |    +-- SessionHosted     another live process hosts the session (its lease, docs/serve.md)
 |    +-- StateError        a stored session state document of the wrong shape (names key and field)
 +-- ModelError             any model backend; `.provider_text` keeps the provider's own words
 |    +-- ContextOverflow   the request does not fit the model's window
 |    +-- RateLimited
 |    +-- AuthError         missing or rejected key
 |    +-- ModelUnavailable  unknown model, unreachable server, missing/corrupt model file
 |    +-- BadResponse       malformed model output
 +-- ToolError              a tool failed; its message goes back to the model
 +-- BackendError           an external agent's turn ended without a reply (`avibe.backends`)
 +-- SessionImportError     a session file `vibe import` cannot read (names the file and line; one line)
 +-- RealSessionError       a real-set session that cannot be used (a changed byte, a bad manifest)
 +-- ScriptError            the scripted model got an unexpected or left an unconsumed call
"""

from __future__ import annotations


class AvibeError(Exception):
    """Base of every harness error."""


class ConfigError(AvibeError):
    pass


class StoreError(AvibeError):
    pass


class StoreUnavailable(StoreError):
    pass


class NoRecord(StoreUnavailable):
    """A read-only command found no record (no SQLite file, or an empty database); nothing was created."""


class UnknownFeed(StoreError):
    """A feed (watch, timer, callback) id the record does not have."""


class UnknownSession(StoreError):
    pass


class SessionHosted(StoreError):
    """Another live process holds the session's lease: nothing was written (docs/serve.md)."""

    def __init__(self, session: str, pid: int, host: str, since: str) -> None:
        super().__init__(
            f"session {session} is hosted by another process (pid {pid} on {host} since {since}); "
            "wait for it to finish or stop it, then run again (the lease of a process that died is "
            "taken over)"
        )
        self.session, self.pid, self.host, self.since = session, pid, host, since


class ModelError(AvibeError):
    def __init__(self, message: str, provider_text: str = "") -> None:
        super().__init__(message)
        self.provider_text = provider_text


class ContextOverflow(ModelError):
    pass


class RateLimited(ModelError):
    pass


class AuthError(ModelError):
    pass


class ModelUnavailable(ModelError):
    pass


class BadResponse(ModelError):
    pass


class ToolError(AvibeError):
    pass


class ScriptError(AvibeError):
    pass


class RealSessionError(AvibeError):
    """A real session that cannot be used: a changed byte, a bad manifest, a segment that is not there."""


class SessionImportError(AvibeError, ValueError):
    """A Claude Code, Codex or OpenCode session file that cannot be imported. The message is one line
    that names the file (and the line or message where known) and what is wrong with it."""


class StateError(StoreError):
    """A stored session state document of the wrong shape: the message names its key and the field."""


class BackendError(AvibeError):
    """An external agent's turn (Claude Code, Codex, OpenCode) that did not end in a reply; the message
    says what happened and what to do. Here, not in `avibe.backends`, so that the host catches it
    without importing an adapter."""
