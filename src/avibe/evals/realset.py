"""The real-session set of the memory evaluation (docs/eval.md): public Claude Code, Codex and Craft Agents
sessions, each cut to a segment, with its truth written by hand in the scenario format.

`real/manifest.yaml` names each session by repository, path and commit with the sha256 of those bytes
upstream, its licence, whether its file is kept in this repository, and its segment (the JSONL lines
replayed, an optional cap on each tool output, and the sha256 of the segment once cut and scrubbed).
`real/truth/<id>.yaml` is the session's truth (`truth:` of docs/eval-format.md): the user's rules byte
for byte, the mission, the probes. A session whose licence allows redistribution is kept, scrubbed, in
`real/sessions/<id>.jsonl`; the others are fetched by `scripts/fetch_real_sessions.py` (from GitHub, or
from a local folder or git mirror), checked against the upstream sha256, cut and scrubbed the same way
into the fetch folder (`AVIBE_REAL_SESSIONS`, default the user cache dir's `real-sessions/`).

Scrubbing (evals/scrub.py) works on the decoded JSON strings of every line, so each line stays valid
JSON: home folders with a user name, the names the manifest lists for the session, e-mail addresses and
token-shaped secrets are replaced. The same bytes in give the same bytes out, so a fetched segment is
checked against the manifest's segment sha256 too.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import Field, model_validator

from avibe.errors import RealSessionError as RealSessionError  # re-exported: the CLI catches it
from avibe.evals.importers import parse_session_file
from avibe.evals.scenario import (
    AssistantTurn,
    Event,
    GroundTruth,
    Scenario,
    ScenarioError,
    ToolUse,
    scenario_from_dict,
    scenario_to_dict,
)
from avibe.evals.scrub import scrub
from avibe.evals.strict import FieldProblem, FileModel, NonEmpty, read

REAL_DIR: Final = Path(__file__).parent / "real"
MANIFEST: Final = REAL_DIR / "manifest.yaml"
KEPT_DIR: Final = REAL_DIR / "sessions"
TRUTH_DIR: Final = REAL_DIR / "truth"
FETCH_ENV: Final = "AVIBE_REAL_SESSIONS"
FETCH_HINT: Final = "run scripts/fetch_real_sessions.py"
SCENARIO_TYPE: Final = "real"
RAW_URL: Final = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
CUT_NOTE: Final = "\n[... {n} more characters cut for the real set's segment]"
Agent = Literal["claude", "codex", "craft", "antigravity"]  # the importer's format of the session file


# ---- the manifest ------------------------------------------------------------------------------------


class _SourceFile(FileModel):
    repo: NonEmpty
    path: NonEmpty
    commit: NonEmpty
    sha256: NonEmpty
    licence: NonEmpty
    kept: bool

    @model_validator(mode="after")
    def _well_formed(self) -> _SourceFile:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+", self.repo):
            raise FieldProblem("repo", f"{self.repo!r} is not owner/name")
        if not re.fullmatch(r"[0-9a-f]{40}", self.commit):
            raise FieldProblem("commit", "expected 40 lower-case hex digits")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise FieldProblem("sha256", "expected 64 lower-case hex digits")
        return self


class _SegmentFile(FileModel):
    first_line: int = Field(ge=1)
    last_line: int = Field(ge=1)
    output_cap: int | None = Field(default=None, ge=100)
    reply_cap: int | None = Field(default=None, ge=200)
    sha256: NonEmpty

    @model_validator(mode="after")
    def _ordered(self) -> _SegmentFile:
        if self.last_line < self.first_line:
            raise FieldProblem("last_line", "comes before first_line")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise FieldProblem("sha256", "expected 64 lower-case hex digits")
        return self


class _SessionFile(FileModel):
    id: NonEmpty
    agent: Agent
    user: NonEmpty
    description: NonEmpty
    attribution: NonEmpty
    source: _SourceFile
    segment: _SegmentFile
    scrub_names: list[NonEmpty] = Field(default_factory=list)
    language: str = "en"  # the person's, ISO 639-1
    peer_compaction: bool = False  # the original transcript holds the agent's own compaction

    @model_validator(mode="after")
    def _safe_id(self) -> _SessionFile:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.id):
            raise FieldProblem("id", "lower-case letters, digits and '-' only (it names files)")
        if not re.fullmatch(r"[a-z]{2}", self.language):
            raise FieldProblem("language", "expected an ISO 639-1 code (two lower-case letters)")
        return self


class _ManifestFile(FileModel):
    format: int = 1
    sessions: list[_SessionFile]


@dataclass(frozen=True, slots=True)
class RealSession:
    """One session of the set: where its bytes come from and which part of them is replayed."""

    id: str
    agent: Agent
    user: str  # the person's name in the replay (never the real one)
    description: str
    attribution: str
    repo: str
    path: str
    commit: str
    sha256: str  # of the file's bytes upstream, at `commit`
    licence: str
    kept: bool  # its (cut, scrubbed) file is in this repository
    first_line: int  # the JSONL lines replayed, 1-based, both included
    last_line: int
    output_cap: int | None  # each tool output and text argument cut to this many characters in the replay
    segment_sha256: str  # of the segment once cut and scrubbed
    scrub_names: tuple[str, ...] = ()
    reply_cap: int | None = None  # each assistant reply's text cut to this many characters in the replay
    language: str = "en"  # the person's, ISO 639-1
    peer_compaction: bool = False  # the original transcript holds the agent's own compaction

    @property
    def url(self) -> str:
        return RAW_URL.format(repo=self.repo, commit=self.commit, path=self.path)

    @property
    def scenario_id(self) -> str:
        return f"real-{self.id}"


def load_manifest(path: Path = MANIFEST) -> tuple[RealSession, ...]:
    """The sessions of the manifest, checked strictly (every bad field named, ids unique)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise RealSessionError(f"{path}: cannot read the real-session manifest ({err})") from None
    try:
        manifest = read(_ManifestFile, data)
    except ScenarioError as err:
        raise RealSessionError("\n".join(f"{path}: {line}" for line in str(err).splitlines())) from None
    sessions = tuple(_session(s) for s in manifest.sessions)
    ids = [s.id for s in sessions]
    if len(set(ids)) != len(ids):
        raise RealSessionError(f"{path}: a session id is used twice")
    return sessions


def _session(s: _SessionFile) -> RealSession:
    return RealSession(
        s.id,
        s.agent,
        s.user,
        s.description,
        s.attribution,
        s.source.repo,
        s.source.path,
        s.source.commit,
        s.source.sha256,
        s.source.licence,
        s.source.kept,
        s.segment.first_line,
        s.segment.last_line,
        s.segment.output_cap,
        s.segment.sha256,
        tuple(s.scrub_names),
        s.segment.reply_cap,
        s.language,
        s.peer_compaction,
    )


def default_fetch_dir() -> Path:
    """Where fetched segments live: AVIBE_REAL_SESSIONS, else the user cache dir's real-sessions/."""
    configured = os.environ.get(FETCH_ENV)
    if configured:
        return Path(configured)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("avibe", appauthor=False)) / "real-sessions"


def local_file(session: RealSession, fetch_dir: Path | None = None) -> Path:
    """The session's segment file here: in the repository when kept, else in the fetch folder."""
    if session.kept:
        return KEPT_DIR / f"{session.id}.jsonl"
    return (fetch_dir or default_fetch_dir()) / f"{session.id}.jsonl"


# ---- bytes: check, cut, scrub ------------------------------------------------------------------------


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cut(data: bytes, first_line: int, last_line: int) -> bytes:
    """Lines first_line..last_line (1-based, both included; a JSONL line ends at "\\n" only)."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    if last_line > len(lines):
        raise RealSessionError(f"the segment ends at line {last_line}, the file has {len(lines)} lines")
    return b"\n".join(lines[first_line - 1 : last_line]) + b"\n"


def prepare(upstream: bytes, session: RealSession) -> bytes:
    """The segment file from the upstream bytes: their sha256 checked, the lines cut, scrubbed, and the
    result checked against the manifest's segment sha256. Raises RealSessionError on any mismatch."""
    got = sha256_of(upstream)
    if got != session.sha256:
        raise RealSessionError(
            f"{session.id}: sha256 mismatch for {session.repo}/{session.path}@{session.commit[:12]}: "
            f"expected {session.sha256}, got {got}"
        )
    segment = scrub(cut(upstream, session.first_line, session.last_line), session.scrub_names)
    made = sha256_of(segment)
    if made != session.segment_sha256:
        raise RealSessionError(
            f"{session.id}: the cut and scrubbed segment has sha256 {made}, the manifest says "
            f"{session.segment_sha256} (the scrubbing changed since the manifest was written?)"
        )
    return segment


# ---- scenarios ---------------------------------------------------------------------------------------


def truth_file(session: RealSession) -> Path:
    return TRUTH_DIR / f"{session.id}.yaml"


def _short(text: str, cap: int | None) -> str:
    return text if cap is None or len(text) <= cap else text[:cap] + CUT_NOTE.format(n=len(text) - cap)


def _capped(events: Iterable[Event], cap: int | None, reply_cap: int | None = None) -> tuple[Event, ...]:
    """Each tool output, and each text argument of a call (a file's content written, a patch), cut to
    `cap` characters; each assistant reply's text to `reply_cap` (a report of 16,000 characters is more
    than a small window's model could have written, and a step larger than the window can never move
    out); each with a note saying how much was cut."""

    def one(use: ToolUse) -> ToolUse:
        arguments = {k: _short(v, cap) if isinstance(v, str) else v for k, v in use.arguments.items()}
        return replace(use, arguments=arguments, output=_short(use.output, cap))

    return tuple(
        replace(e, text=_short(e.text, reply_cap), tool_uses=tuple(one(u) for u in e.tool_uses))
        if isinstance(e, AssistantTurn)
        else e
        for e in events
    )


def build_scenario(session: RealSession, file: Path) -> Scenario:
    """The session's segment as a scenario with its truth: the file's sha256 checked against the
    manifest, imported as `vibe import` does, tool outputs capped, and the truth grounded in it (every
    rule and the mission verbatim in a user message of the segment: `scenario_from_dict` checks)."""
    data = file.read_bytes()
    if sha256_of(data) != session.segment_sha256:
        raise RealSessionError(
            f"{session.id}: {file} is not the manifest's segment (sha256 {sha256_of(data)}); "
            f"{FETCH_HINT} again"
        )
    imported = parse_session_file(file, session.user, session.agent)
    truth_data = _truth_data(session)
    scenario = Scenario(
        session.scenario_id,
        SCENARIO_TYPE,
        None,
        session.user,
        _capped(imported.scenario.events, session.output_cap, session.reply_cap),
        GroundTruth(),
        imported.scenario.start,
        session.description,
    )
    form = scenario_to_dict(scenario)
    form["truth"] = truth_data
    try:
        return scenario_from_dict(form)
    except ScenarioError as err:
        raise RealSessionError(f"{truth_file(session)}: {err}") from None


def _truth_data(session: RealSession) -> dict[str, Any]:
    path = truth_file(session)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise RealSessionError(f"{path}: cannot read the session's truth ({err})") from None
    if not isinstance(data, dict) or set(data) != {"truth"} or not isinstance(data["truth"], dict):
        raise RealSessionError(f"{path}: expected one mapping, `truth:` (docs/eval-format.md)")
    return dict(data["truth"])


def session_labels(sessions: Sequence[RealSession] | None = None) -> dict[str, dict[str, str]]:
    """What each session is, for the report's breakdowns (avibe.evals.report_groups), by scenario id:
    the person's language; whether a standing request of theirs has none of the memo's rule words (the
    memo's word list would not catch it); whether they revised or withdrew a rule; whether the original
    transcript holds the peer's own compaction."""
    from avibe.checkpoint.memo.words import reads_as_rule

    labels: dict[str, dict[str, str]] = {}
    for session in sessions if sessions is not None else load_manifest():
        items = _truth_data(session).get("items") or []
        unworded = any(not reads_as_rule(str(i.get("text", ""))) for i in items)
        revised = any(i.get("status") in {"superseded", "revoked"} for i in items)
        labels[session.scenario_id] = {
            "language": session.language,
            "a request without rule words": "yes" if unworded else "no",
            "a rule revised or withdrawn": "yes" if revised else "no",
            "the peer's own compaction in the transcript": "yes" if session.peer_compaction else "no",
        }
    return labels


@dataclass(frozen=True, slots=True)
class RealSet:
    scenarios: tuple[Scenario, ...]
    missing: tuple[str, ...]  # one line per session whose segment is not here


def missing_line(session: RealSession) -> str:
    return f"real session {session.id} ({session.repo}/{session.path}): not fetched: {FETCH_HINT}"


def real_set(
    fetch_dir: Path | None = None,
    sessions: Sequence[RealSession] | None = None,
    build: Callable[[RealSession, Path], Scenario] = build_scenario,
) -> RealSet:
    """Every session of the set whose segment is here, as a scenario; the others named, one line each."""
    found: list[Scenario] = []
    missing: list[str] = []
    for session in sessions if sessions is not None else load_manifest():
        file = local_file(session, fetch_dir)
        if not file.is_file():
            missing.append(missing_line(session))
            continue
        found.append(build(session, file))
    return RealSet(tuple(found), tuple(missing))


# ---- fetching ----------------------------------------------------------------------------------------


def _git_dir(folder: Path) -> bool:
    bare = (folder / "HEAD").is_file() and (folder / "objects").is_dir()
    return bare or (folder / ".git").exists()


def source_candidates(session: RealSession, folder: Path) -> list[Path]:
    """Where a local source folder may hold the session's repository: a git mirror named `owner+name`
    (optionally with its git directory in `repo/`, as `fetch` tools lay them out) or `owner/name`."""
    owner, name = session.repo.split("/", 1)
    return [folder / f"{owner}+{name}" / "repo", folder / f"{owner}+{name}", folder / owner / name]


def read_source(session: RealSession, source: Path | None = None, timeout: float = 60.0) -> bytes:
    """The session file's bytes upstream: from raw.githubusercontent.com at its commit, or from a local
    folder - a git mirror of the repository (`git show COMMIT:PATH`), or a plain copy of the file at
    `OWNER/NAME/COMMIT/PATH` or `OWNER/NAME/PATH`. Nothing is checked here (`prepare` checks)."""
    if source is None:
        import urllib.request

        try:
            with urllib.request.urlopen(session.url, timeout=timeout) as response:  # the manifest's https URL
                data: bytes = response.read()
                return data
        except OSError as err:
            raise RealSessionError(f"{session.id}: cannot fetch {session.url} ({err})") from None
    import subprocess

    for folder in source_candidates(session, source):
        if folder.is_dir() and _git_dir(folder):
            shown = subprocess.run(
                ["git", "-C", str(folder), "show", f"{session.commit}:{session.path}"],
                capture_output=True,
                check=False,
            )
            if shown.returncode == 0:
                return shown.stdout
        for file in (folder / session.commit / session.path, folder / session.path):
            if file.is_file():
                return file.read_bytes()
    raise RealSessionError(
        f"{session.id}: {source} holds no copy of {session.repo}/{session.path} at {session.commit[:12]} "
        "(a git mirror OWNER+NAME/ or OWNER/NAME/, or the file at OWNER/NAME/COMMIT/PATH)"
    )


def fetch(session: RealSession, dest: Path, source: Path | None = None) -> Path:
    """Fetch, check, cut and scrub one session into `dest/<id>.jsonl`; a mismatch writes nothing."""
    segment = prepare(read_source(session, source), session)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f"{session.id}.jsonl"
    partial = target.with_suffix(".jsonl.partial")
    partial.write_bytes(segment)
    partial.replace(target)
    return target
