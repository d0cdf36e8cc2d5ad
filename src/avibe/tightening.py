"""What a project's own config tightened, remembered in Avibe's home: the agent can write the project's
`.avibe/config.toml`, so it could take the person's tightening away by deleting, breaking or loosening
that file before the next start. It cannot take the remembered copy away.

- At every session start (avibe.cli.terminal.announce) the tightening the project's config applies - a
  stricter sandbox, approval = "ask", deny rules, narrower allow lists, a smaller model window - is merged
  into what is remembered for the project (the strictest of both, per setting) and written atomically to
  `<home>/tightening/<hash of the project's resolved path>.json`. Avibe's home is hidden from every
  sandboxed command (avibe.tools.sandbox), so the agent can neither read nor change the record; in
  full-access nothing is protected from the agent, this record included.
- load_settings applies the record like the file it stands in for: no setting it holds is looser than
  the record, except where the environment sets it (the person's own word at this start, which also wins
  over the file). What the record keeps that the file no longer asks for is said in one line at every
  start.
- Only the person drops it: `vibe config forget-tightening` in the project (avibe.cli.config). The agent
  cannot run that against the real home from inside the sandbox (the home is not there).
- A trusted project's config applies as written (the person trusts it to loosen) and is neither
  remembered nor held to a record.

Pure values and file I/O only: avibe.config builds the values, this module never imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from avibe.errors import ConfigError
from avibe.tools.pathrule import compile_path_rule

# avibe.config.SANDBOX_MODES, strictest first (a test keeps the two equal)
SANDBOX_ORDER: Final = ("read-only", "workspace-write", "full-access")
FOLDER: Final = "tightening"
FORGET_COMMAND: Final = "vibe config forget-tightening"
_MAX_RECORD_BYTES: Final = 1 << 20
_ALLOW_KEYS: Final = ("allow_commands", "allow_writes")
# The settings a record holds that the environment may still set at a start (deny rules only add up).
HELD_KEYS: Final = ("sandbox", "approval", "model_window", *_ALLOW_KEYS)


@dataclass(frozen=True, slots=True)
class Tightening:
    """Safety settings, each None where it says nothing. As a record: what a project tightened. As the
    settings in force: every field set (allow lists as tuples)."""

    sandbox: str | None = None
    approval: str | None = None  # "ask" in a record; "auto" or "ask" in force
    model_window: int | None = None
    deny: tuple[str, ...] = ()
    allow_commands: tuple[str, ...] | None = None  # None: no cap on what the person's lists allow
    allow_writes: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return any(_says(f.name, getattr(self, f.name)) for f in fields(self))

    def merged(self, other: Tightening, skip: frozenset[str] = frozenset()) -> Tightening:
        """The stricter of the two in each setting; a setting in `skip` keeps this one's value."""
        approval = "ask" if "ask" in (self.approval, other.approval) else self.approval or other.approval
        stricter = Tightening(
            _stricter_sandbox(self.sandbox, other.sandbox),
            approval,
            _smaller(self.model_window, other.model_window),
            (*self.deny, *(rule for rule in other.deny if rule not in self.deny)),
            _narrower(self.allow_commands, other.allow_commands),
            _narrower(self.allow_writes, other.allow_writes),
        )
        kept = {name: getattr(self, name) for name in skip}
        return replace(stricter, **kept)

    def shown(self) -> list[str]:
        """Each setting this says something about, as config text (`approval = "ask"`)."""
        return [
            f"{f.name} = {json.dumps(list(value) if isinstance(value, tuple) else value)}"
            for f in fields(self)
            if _says(f.name, value := getattr(self, f.name))
        ]

    def beyond(self, other: Tightening) -> Tightening:
        """What this holds that `other` lacks (the parts of a record that made `other` stricter)."""

        def differs(name: str) -> Any:
            return getattr(self, name) if getattr(self, name) != getattr(other, name) else None

        return Tightening(
            differs("sandbox"),
            differs("approval"),
            differs("model_window"),
            tuple(rule for rule in self.deny if rule not in other.deny),
            differs("allow_commands"),
            differs("allow_writes"),
        )


def _says(name: str, value: object) -> bool:
    """Whether a field holds something: an empty allow list does (it allows nothing), no deny rule not."""
    return value is not None and (value != () or name.startswith("allow_"))


def _stricter_sandbox(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return a if SANDBOX_ORDER.index(a) <= SANDBOX_ORDER.index(b) else b


def _smaller(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _narrower(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Allow lists: only what both allow (None allows whatever the other does)."""
    if a is None or b is None:
        return a if b is None else b
    return tuple(pattern for pattern in a if pattern in b)


@dataclass(frozen=True, slots=True)
class Remembered:
    """The record of one project: its resolved folder, the day it was first written, what it holds."""

    project: Path
    since: str
    tightening: Tightening


def record_file(home: Path, project: Path) -> Path:
    digest = hashlib.sha256(str(project).encode("utf-8", "surrogateescape")).hexdigest()
    return home / FOLDER / f"{digest[:32]}.json"


def recall(home: Path, project: Path) -> Remembered | None:
    """The record for `project` (resolved), or None. A damaged record is one ConfigError naming the
    command that drops it: never silently nothing (that would loosen)."""
    path = record_file(home, project)
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror}); fix its permissions") from None
    try:
        if len(data) > _MAX_RECORD_BYTES:
            raise ValueError("over 1 MiB")
        return _parsed(json.loads(data), project)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ConfigError(
            f"the record of what {project}'s config tightened ({path}) is damaged ({exc}); run "
            f"`{FORGET_COMMAND}` in {project} to drop it"
        ) from None


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError("a rule list is not a list of strings")
    return tuple(value)


def _parsed(data: Any, project: Path) -> Remembered:
    if not isinstance(data, dict) or data.get("project") != str(project):
        raise ValueError("not a record of this project")
    sandbox, approval, window = data.get("sandbox"), data.get("approval"), data.get("model_window")
    if sandbox not in (None, *SANDBOX_ORDER) or approval not in (None, "ask"):
        raise ValueError(f"sandbox={sandbox!r}, approval={approval!r}")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ValueError(f"model_window={window!r}")
    commands, writes = (None if data.get(key) is None else _strings(data[key]) for key in _ALLOW_KEYS)
    tightening = Tightening(sandbox, approval, window, _strings(data.get("deny", [])), commands, writes)
    for rule in (*tightening.deny, *(tightening.allow_writes or ())):
        compile_path_rule(rule)  # ValueError: damaged
    return Remembered(project, str(data.get("since", "")), tightening)


def asked(in_force: Tightening, from_project: Collection[str], deny: tuple[str, ...]) -> Tightening:
    """What the project's config tightens at this start: its values in force (`from_project` names the
    settings whose value in force is the file's), its deny rules, and with its approval = "ask" the
    allow lists in force (what runs unasked is part of what asking means)."""
    asks = "approval" in from_project and in_force.approval == "ask"
    return Tightening(
        in_force.sandbox if "sandbox" in from_project and in_force.sandbox != "full-access" else None,
        "ask" if asks else None,
        in_force.model_window if "model_window" in from_project else None,
        deny,
        in_force.allow_commands if asks or "allow_commands" in from_project else None,
        in_force.allow_writes if asks or "allow_writes" in from_project else None,
    )


def project_state(config: Path, error: str | None) -> str:
    """What became of the project's file, for the line that says what the record keeps."""
    if error is not None:
        return f"could not be read ({error})"
    return "no longer asks for it" if os.path.lexists(config) else "is gone"


def pending(record: Remembered | None, offered: Tightening, project: Path) -> Remembered | None:
    """The record to write at this start: the old one made stricter by what the file asks now; None
    when nothing changes."""
    base = record.tightening if record is not None else Tightening()
    merged = base.merged(offered)
    if not merged or merged == base:
        return None
    since = record.since if record is not None else datetime.now(UTC).date().isoformat()
    return Remembered(project, since, merged)


def save(home: Path, record: Remembered) -> None:
    """Write `record` atomically (a temp file in the same folder, fsynced, then renamed over)."""
    path = record_file(home, record.project)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body: dict[str, Any] = {"project": str(record.project), "since": record.since}
    for f in fields(record.tightening):
        value = getattr(record.tightening, f.name)
        body[f.name] = list(value) if isinstance(value, tuple) else value
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tightening-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def remember(home: Path, record: Remembered | None) -> tuple[str, ...]:
    """Save the pending record of a start; a failure is one line to show (the start goes on: the
    settings in force are already the strict ones)."""
    if record is None:
        return ()
    try:
        save(home, record)
    except OSError as exc:
        return (f"could not remember what {record.project}'s config tightened ({exc.strerror or exc})",)
    return ()


def forget(home: Path, project: Path) -> Remembered | None:
    """Drop the record of `project` (resolved); what it held, or None when there was none. A damaged
    record is dropped too."""
    try:
        found = recall(home, project)
    except ConfigError:
        found = Remembered(project, "", Tightening())
    path = record_file(home, project)
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return found


def hold(
    record: Remembered | None, in_force: Tightening, skip: frozenset[str], state: str, config: Path
) -> tuple[Tightening, str | None]:
    """The settings in force made no looser than `record` (except the settings in `skip`), and the line
    that says what the record kept (None when it kept nothing). `state` says what became of the file:
    "is gone", "could not be read (...)", "no longer asks for it"."""
    if record is None:
        return in_force, None
    held = in_force.merged(record.tightening, skip)
    kept = held.beyond(in_force)
    if not kept:
        return held, None
    return held, (
        f"the project config {config} {state}; keeping what it asked for before: {', '.join(kept.shown())} "
        f"(remembered since {record.since or 'an earlier start'}); to drop it, run `{FORGET_COMMAND}` "
        f"in {record.project}"
    )
