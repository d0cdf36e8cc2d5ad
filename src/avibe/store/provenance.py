"""The provenance ledger: which content of the files a later run shows as instructions -
any AGENTS.md, every skill's SKILL.md and the files beside it - the agent left, so nothing it wrote is
ever presented as the user's words.

Provenance is by content: the ledger is a JSON file in Avibe's home (`$AVIBE_HOME/provenance.json`), out
of the agent's reach (the sandbox hides the home), holding the sha256 of every content the agent wrote
or changed under its workdir - whatever the file, whatever tool - with the session and the record entry
(#N, the step whose tool call wrote it). A file shown as instructions whose current hash is listed is
the agent's wherever it is now: an AGENTS.md written in a subfolder later used as the workdir, one
committed on a branch the person merges, a companion file of the person's skill. Once the person writes
other content, it is theirs again. Writes are atomic (a temp file renamed over the ledger) under a lock,
so two processes (a delegated run in the same workdir) never lose each other's entries.

`ToolWatch` fills it around every tool call of a session (and between calls while a background job the
agent started is running): what changed under the workdir (avibe/store/changes.py: new file stamps, new
git objects) is hashed and recorded. Content the person's instruction files already held, or the person
wrote while the chat was open, is never recorded as the agent's: the agent copying the person's
AGENTS.md does not make it the agent's.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from avibe.sources.agent_files import list_agent_dir, read_agent_file
from avibe.store.changes import MAX_HASHED_BYTES, changed, content_hashes, new_blobs, snapshot

log = logging.getLogger(__name__)

LEDGER_FILE: Final = "provenance.json"
AGENTS_MD: Final = "AGENTS.md"
WORKDIR_SKILLS: Final = Path(".avibe") / "skills"
KEEP_CONTENTS: Final = 20_000  # the newest contents the agents left; older ones are forgotten


@dataclass(frozen=True, slots=True)
class AgentWrite:
    """One content an agent left in a file: its sha256, the session, and the step's record entry."""

    sha256: str
    session: str
    seq: int | None
    at: str


def file_hash(path: Path) -> str | None:
    """The sha256 of a regular file's bytes (the file itself no link, at most MAX_HASHED_BYTES), or None
    when there is none to read so."""
    return read_agent_file(path.parent, path.name, max_bytes=MAX_HASHED_BYTES, text=False).digest


def watched_files(workdir: Path) -> list[str]:
    """The workdir's files a run shows as instructions, relative: AGENTS.md, and every file of each of
    its skills (SKILL.md and the files beside it), listed with no link followed."""
    found = [AGENTS_MD]
    for skill in list_agent_dir(workdir, WORKDIR_SKILLS) or []:
        names = list_agent_dir(workdir, WORKDIR_SKILLS / skill) or []
        found += [(WORKDIR_SKILLS / skill / name).as_posix() for name in names]
    return found


def _contents(data: Any) -> dict[str, dict[str, Any]]:
    """sha256 -> the agent's write, from a ledger of either version (version 1 listed them by file)."""
    if not isinstance(data, dict):
        return {}
    contents: dict[str, dict[str, Any]] = {}
    files = data.get("files")
    for path, entries in files.items() if isinstance(files, dict) else ():
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
                contents[entry["sha256"]] = {**entry, "path": path}
    found = data.get("contents")
    if isinstance(found, dict):
        contents.update({k: v for k, v in found.items() if isinstance(v, dict)})
    return contents


class ProvenanceLedger:
    """The ledger file in Avibe's home; see the module docstring."""

    def __init__(self, home: Path) -> None:
        self.path = home / LEDGER_FILE

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("the provenance ledger %s cannot be read (%s); starting it afresh", self.path, exc)
            return {}
        return _contents(data)

    def agent_write(self, path: Path, digest: str | None = None) -> AgentWrite | None:
        """The agent's write of the content `path` holds now (or of sha256 `digest`, when the caller read
        it already), wherever the agent wrote it; None: the user's, or no file."""
        digest = digest or file_hash(path)
        entry = self._load().get(digest) if digest else None
        if digest is None or entry is None:
            return None
        seq = entry.get("seq")
        return AgentWrite(digest, str(entry.get("session", "?")), seq if isinstance(seq, int) else None,
                          str(entry.get("at")))  # fmt: skip

    def known(self) -> frozenset[str]:
        """Every content the agents left (their sha256)."""
        return frozenset(self._load())

    def record(self, path: Path, digest: str, session: str, seq: int | None) -> None:
        """Note that an agent left the content `digest` in `path` (session, the step's entry #seq)."""
        self.record_all([(path, digest)], session, seq)

    def record_all(self, found: Iterable[tuple[Path, str]], session: str, seq: int | None) -> None:
        """Note each (path, sha256) as the agent's, at one step; the newest KEEP_CONTENTS are kept."""
        at = datetime.now(UTC).isoformat(timespec="seconds")
        writes = {digest: {**asdict(AgentWrite(digest, session, seq, at)), "path": str(path)}
                  for path, digest in found}  # fmt: skip
        if not writes:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            contents = self._load()
            for digest in writes:
                contents.pop(digest, None)  # re-recorded: the newest write, kept longest
            contents.update(writes)
            kept = dict(list(contents.items())[-KEEP_CONTENTS:])
            self._write({"version": 2, "contents": kept})

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
                json.dump(data, out, indent=1)  # in order: the oldest contents are forgotten first
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


class ToolWatch:
    """Records what changes under the workdir around each of a session's tool calls as the agent's.
    Between calls a change is the agent's only while a background job it started may be running
    (`busy`); otherwise it is the user's (an edit in their editor while the chat is open)."""

    def __init__(
        self, ledger: ProvenanceLedger, workdir: Path, session: str, busy: Callable[[], bool] = lambda: False
    ) -> None:
        self.ledger, self.workdir, self.session, self.busy = ledger, workdir, session, busy
        self._skip = (ledger.path.parent,)  # Avibe's home: its own files change at every step
        self._snap = snapshot(workdir, self._skip)
        self._seen = self._instructions()
        agents = ledger.known()
        self._user = {digest for digest in self._seen.values() if digest and digest not in agents}
        self._step: int | None = None
        self._busy = False  # a job was running at the last look

    def _instructions(self) -> dict[str, str | None]:
        """The instruction files' hashes (read each look, whatever their stamps say)."""
        read = (read_agent_file(self.workdir, rel, max_bytes=MAX_HASHED_BYTES, text=False) for rel in
                watched_files(self.workdir))  # fmt: skip
        return {str(found.path.relative_to(self.workdir)): found.digest for found in read}

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
        now, seen = snapshot(self.workdir, self._skip), self._instructions()
        found = content_hashes(self.workdir, changed(self._snap, now))
        found += [(self.workdir / rel, d) for rel, d in seen.items() if d and d != self._seen.get(rel)]
        if by_agent:
            found += [(self.workdir / ".git", d) for d in new_blobs(self.workdir, self._snap, now)]
            mine = [(path, digest) for path, digest in found if digest not in self._user]
            try:  # content the person's files already held is theirs, even when the agent copies it
                self.ledger.record_all(mine, self.session, self._step)
            except OSError as exc:  # the run goes on; the files are then not marked
                log.error("cannot record the agent's changes in the provenance ledger: %s", exc)
        else:
            agents = self.ledger.known() if found else frozenset()
            self._user.update(d for _, d in found if d not in agents)
        self._snap, self._seen, self._busy = now, seen, self.busy()
