"""The provenance ledger (issue 27 item 7): which content of the files a later run shows as instructions -
the workdir's AGENTS.md and its skills (`.avibe/skills/*/SKILL.md`) - the agent left there, so nothing it
wrote is ever presented as the user's words.

The ledger is a JSON file in Avibe's home (`$AVIBE_HOME/provenance.json`), out of the agent's reach (the
sandbox hides the home): for each file, the sha256 of every content an agent left in it, with the session
and the record entry (#N, the step whose tool call wrote it). A file whose current hash is listed was last
changed by the agent; once the user edits it (another hash) it is the user's again. Writes are atomic
(a temp file renamed over the ledger) under a lock, so two processes (a delegated run in the same
workdir) never lose each other's entries.

`ToolWatch` fills it: it hashes the watched files around every tool call of a session (write_file,
edit_file, the shell, a rename: whatever changed them), and between calls while a background job the
agent started is running.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

log = logging.getLogger(__name__)

LEDGER_FILE: Final = "provenance.json"
AGENTS_MD: Final = "AGENTS.md"
WORKDIR_SKILLS: Final = Path(".avibe") / "skills"
HASH_CHUNK: Final = 1 << 20
KEEP_PER_FILE: Final = 32  # the newest contents an agent left in one file; older ones are forgotten


@dataclass(frozen=True, slots=True)
class AgentWrite:
    """One content an agent left in a file: its sha256, the session, and the step's record entry."""

    sha256: str
    session: str
    seq: int | None
    at: str


def file_hash(path: Path) -> str | None:
    """The sha256 of a regular file's bytes (links followed), or None when there is none to read. Read
    in chunks: the agent may point AGENTS.md at a huge file, and this runs around every tool call."""
    try:
        if not path.is_file():
            return None
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(HASH_CHUNK):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def watched_files(workdir: Path) -> list[Path]:
    """The workdir's files a later run shows as instructions: AGENTS.md and every skill's SKILL.md."""
    skills = workdir / WORKDIR_SKILLS
    try:
        found = sorted(skills.glob("*/SKILL.md")) if skills.is_dir() else []
    except OSError:
        found = []
    return [workdir / AGENTS_MD, *found]


def _key(path: Path) -> str:
    """The ledger's name for a file: its folder resolved, the name kept (a linked AGENTS.md is itself)."""
    try:
        return str(path.parent.resolve() / path.name)
    except (OSError, RuntimeError):
        return str(path.absolute())


def _entries(files: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The ledger's entries for `path` (anything malformed in a hand-edited ledger left out)."""
    found = files.get(_key(path))
    return [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []


class ProvenanceLedger:
    """The ledger file in Avibe's home; see the module docstring."""

    def __init__(self, home: Path) -> None:
        self.path = home / LEDGER_FILE

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("the provenance ledger %s cannot be read (%s); starting it afresh", self.path, exc)
            return {}
        files = data.get("files") if isinstance(data, dict) else None
        return files if isinstance(files, dict) else {}

    def agent_write(self, path: Path, digest: str | None = None) -> AgentWrite | None:
        """The agent's write that left `path` as it is now (or with the content of sha256 `digest`,
        when the caller read it already), or None: the user's, or no file."""
        digest = digest or file_hash(path)
        if digest is None:
            return None
        for entry in reversed(_entries(self._load(), path)):
            if entry.get("sha256") == digest:
                return AgentWrite(
                    digest, str(entry.get("session", "?")), entry.get("seq"), str(entry.get("at"))
                )
        return None

    def record(self, path: Path, digest: str, session: str, seq: int | None) -> None:
        """Note that an agent left the content `digest` in `path` (session, the step's entry #seq)."""
        write = AgentWrite(digest, session, seq, datetime.now(UTC).isoformat(timespec="seconds"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            files = self._load()
            entries = [e for e in _entries(files, path) if e.get("sha256") != digest]
            files[_key(path)] = [*entries, asdict(write)][-KEEP_PER_FILE:]
            self._write({"version": 1, "files": files})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.path.with_name(LEDGER_FILE + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, data: dict[str, Any]) -> None:
        handle, temp = tempfile.mkstemp(prefix=".provenance-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


class ToolWatch:
    """Hashes a session's watched files around each of its tool calls and records what the agent
    changed. Between calls a change is the agent's only while a background job it started may be
    running (`busy`); otherwise it is the user's (an edit in their editor while the chat is open)."""

    def __init__(
        self, ledger: ProvenanceLedger, workdir: Path, session: str, busy: Callable[[], bool] = lambda: False
    ) -> None:
        self.ledger, self.workdir, self.session, self.busy = ledger, workdir, session, busy
        self._seen = self._hashes()
        self._step: int | None = None
        self._busy = False  # a job was running at the last look

    def _hashes(self) -> dict[Path, str | None]:
        return {path: file_hash(path) for path in watched_files(self.workdir)}

    @contextmanager
    def __call__(self, call: object, seq: int | None) -> Iterator[None]:
        """Around one tool call of the step whose record entry is #seq."""
        self.settle()
        self._step = seq
        try:
            yield
        finally:
            self._look(by_agent=True)

    def agent_changed(self, seq: int | None) -> None:
        """Take in every change since the last look as the agent's, at the step #seq: an external
        agent's turn (Claude Code, Codex, OpenCode change files as they like while they run)."""
        self._step = seq
        self._look(by_agent=True)

    def settle(self) -> None:
        """Take in changes made since the last look (before a tool call, when the session closes)."""
        self._look(by_agent=self._busy or self.busy())

    def _look(self, *, by_agent: bool) -> None:
        now = self._hashes()
        if by_agent:
            for path, digest in now.items():
                if digest is not None and digest != self._seen.get(path):
                    try:
                        self.ledger.record(path, digest, self.session, self._step)
                    except OSError as exc:  # the run goes on; the file is then not marked
                        log.error("cannot record %s in the provenance ledger: %s", path, exc)
        self._seen, self._busy = now, self.busy()
