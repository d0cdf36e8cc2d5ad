"""The real-session set of the memory evaluation (issue 31, item 1): public Claude Code and Codex
sessions, each cut to a segment, with its truth written by hand in the scenario format.

`real/manifest.yaml` names each session by repository, path and commit with the sha256 of those bytes
upstream, its licence, whether its file is kept in this repository, and its segment (the JSONL lines
replayed, an optional cap on each tool output, and the sha256 of the segment once cut and scrubbed).
`real/truth/<id>.yaml` is the session's truth (`truth:` of docs/eval-format.md): the user's rules byte
for byte, the mission, the probes. A session whose licence allows redistribution is kept, scrubbed, in
`real/sessions/<id>.jsonl`; the others are fetched by `scripts/fetch_real_sessions.py` (from GitHub, or
from a local folder or git mirror), checked against the upstream sha256, cut and scrubbed the same way
into the fetch folder (`AVIBE_REAL_SESSIONS`, default the user cache dir's `real-sessions/`).

Scrubbing works on the decoded JSON strings of every line, so each line stays valid JSON: home folders
with a user name, the names the manifest lists for the session, e-mail addresses and token-shaped
secrets are replaced. The same bytes in give the same bytes out, so a fetched segment is checked against
the manifest's segment sha256 too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import Field, model_validator

from avibe.errors import AvibeError
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
Agent = Literal["claude", "codex"]


class RealSessionError(AvibeError):
    """A real session that cannot be used: a changed byte, a bad manifest, a segment that is not there."""


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

    @model_validator(mode="after")
    def _safe_id(self) -> _SessionFile:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.id):
            raise FieldProblem("id", "lower-case letters, digits and '-' only (it names files)")
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


_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}")
_EMAIL_KEEP: Final = ("example.com", "anthropic.com", "openai.com")  # no person's address
_SECRETS: Final = (
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # a JWT
)
SECRET_MARK: Final = "[redacted-secret]"
# machine identifiers: a network card's MAC address, a Windows account's SID, a public IPv4 address
_MACHINE: Final = (
    (
        re.compile(r"(?<![0-9A-Fa-f:-])(?:[0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:-])"),
        "[redacted-mac]",
    ),
    (re.compile(r"\bS-1-5-21(?:-\d+){1,4}"), "S-1-5-21-[redacted]"),
    (
        re.compile(
            r"(?<![\d.])(?!(?:127|10|0)\.|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.|255\.)"
            r"(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\d.])"
        ),
        "[redacted-ip]",
    ),
)
SCRUBBED_NAME: Final = "user"
# a home folder that names its user: /Users/NAME, /home/NAME, C:\Users\NAME (any slashes), and Claude
# Code's project folder names made from them (-Users-NAME-..., -home-NAME-..., C--Users-NAME-...)
_HOMES: Final = (
    re.compile(r"(?<![A-Za-z0-9])(/Users/|/home/)(?!user\b)([^/\s\"'\\:]+)"),
    re.compile(r"([A-Za-z]:(?:\\{1,2}|/)Users(?:\\{1,2}|/))(?!user\b)([^\\/\s\"':]+)"),
    re.compile(r"((?:^|[\s/\"'])-(?:Users|home)-)(?!user-)([^-/\s\"']+)"),
    re.compile(r"([A-Za-z]--Users-)(?!user-)([^-/\s\"']+)"),
)


# a home folder's last part that names no person (and words too common to replace wherever they occur)
_NOT_NAMES: Final = frozenset(
    {"user", "shared", "public", "default", "runner", "root", "admin", "guest", "ubuntu", "dev", "developer",
     "test", "code", "work", "app", "build", "node", "docker", "vagrant", "ec2-user", "coder", "vscode"}
)  # fmt: skip


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


def home_names(texts: Iterable[str]) -> set[str]:
    """The user names the home folders in `texts` show (`/Users/NAME`, `C:\\Users\\NAME` ...): the same
    name is scrubbed wherever else it occurs (an `ls -l` owner column, a `cygpath` argument)."""
    found: set[str] = set()
    for text in texts:
        for pattern in _HOMES:
            found |= {m.group(2) for m in pattern.finditer(text)}
    return {name for name in found if len(name) >= 3 and name.casefold() not in _NOT_NAMES}


def scrub_text(text: str, names: Iterable[str] = ()) -> str:
    """Personal data out of one string: token-shaped secrets, machine identifiers (MAC addresses, Windows
    SIDs, public IPv4 addresses), e-mail addresses other than the agents' own, the user names of home
    folders, and the given names wherever they occur (whole words, any case)."""
    for pattern in _SECRETS:
        text = pattern.sub(SECRET_MARK, text)
    for pattern, mark in _MACHINE:
        text = pattern.sub(mark, text)
    text = _EMAIL.sub(lambda m: m.group(0) if m.group(0).endswith(_EMAIL_KEEP) else "user@example.com", text)
    for pattern in _HOMES:
        text = pattern.sub(lambda m: m.group(1) + SCRUBBED_NAME, text)
    for name in sorted(set(names), key=lambda n: (-len(n), n)):
        text = re.sub(
            rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", SCRUBBED_NAME, text, flags=re.IGNORECASE
        )
    return text


def _scrub_value(value: Any, names: Iterable[str]) -> Any:
    if isinstance(value, str):
        return scrub_text(value, names)
    if isinstance(value, list):
        return [_scrub_value(v, names) for v in value]
    if isinstance(value, dict):
        return {scrub_text(k, names): _scrub_value(v, names) for k, v in value.items()}
    return value


def scrub(data: bytes, names: Sequence[str] = ()) -> bytes:
    """Every JSONL line's strings scrubbed (`scrub_text`, with the given names and every user name a
    home folder in the segment shows); each line stays one valid JSON value, written compactly with its
    non-ASCII characters as they are. The same bytes in give the same bytes out."""
    values: list[Any] = []
    for number, line in enumerate(data.decode("utf-8").split("\n"), 1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise RealSessionError(f"line {number} of the segment is not JSON ({err.msg})") from None
    every = sorted({*names, *home_names(_strings(values))})
    out = [json.dumps(_scrub_value(v, every), ensure_ascii=False, separators=(",", ":")) for v in values]
    return ("\n".join(out) + "\n").encode("utf-8")


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
