"""Every subcommand, driven with generated bad arguments, settings and files: each ends in
exit code 2 and exactly one line `vibe: ...` on stderr, no traceback and no internal error, and the record
is byte-for-byte what it was - no database file where there was none, the same hash where there was one.
No case may run a model: the model cache is an empty folder and no provider key is in the environment,
so a command that did not refuse its bad input early would fail later (or write), and the test says so.

`check(case)` returns the problems of one case; tests/cli/bad_inputs_tally.py (run by hand) counts
tried / clean over many generated cases per command without stopping at the first problem.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from avibe.cli import app
from avibe.ingress import deliver, record_reply
from avibe.ports import StoredCheckpoint
from avibe.record.entries import KINDS, Source
from avibe.store import open_store

COMMANDS = (
    "run",
    "demo",
    "log",
    "sessions",
    "checkpoints",
    "skill",
    "models",
    "import",
    "eval",
    "eval-scenarios",
    "serve",
    "send",
    "watch",
    "timer",
    "callback",
    "feeds",
    "agents",
    "inspect",
    "chat",
    "config",
    "mcp",
)
BIG = 2**63  # one past SQLite's largest integer
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AVIBE_DATABASE_URL")


@dataclass(frozen=True)
class Case:
    """One bad invocation: the arguments, settings to add, files to create first, a record or not."""

    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()  # name (in the case's folder) -> content; {dir} in args
    populated: bool = True
    why: str = ""


@dataclass
class Place:
    """A fresh folder per case: home (with the record copied in, or empty), files, an empty model cache."""

    root: Path
    home: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"

    @property
    def db(self) -> Path:
        return self.home / "avibe.db"


def _fingerprint(place: Place) -> tuple[str | None, list[str], list[str]]:
    """The record's bytes and files, and the user's config folder (`vibe mcp` writes there)."""
    digest = hashlib.sha256(place.db.read_bytes()).hexdigest() if place.db.exists() else None
    files = sorted(p.name for p in place.home.glob("avibe.db*")) if place.home.exists() else []
    config = place.root / "config"
    written = sorted(f"{p}:{p.stat().st_size}" for p in config.rglob("*")) if config.exists() else []
    return digest, files, written


def _make_record(path: Path) -> None:
    """A record with one session: user, watch and assistant entries, and one checkpoint."""
    at = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    with open_store(f"sqlite:///{path}") as store:
        session = store.create_session("populated", session_id="s-20261130-aaaaaa").id
        deliver(store, session, Source("user", "kofi"), "Handle the queue oldest first", at=at)
        deliver(store, session, Source("watch", "ci"), "colour \x1b[31mred\x1b[0m", at=at)
        record_reply(store, session, "Starting", at=at)
        store.save_checkpoint(StoredCheckpoint(session, 0, at, "## Mission\n- the queue", [], "scene", 2))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "avibe.db"
    _make_record(path)
    return path


@dataclass
class Outcome:
    exit_code: int
    stderr: str
    stdout: str
    problems: list[str]


def run_case(case: Case, template: Path) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix="vibe-bad-"))
    try:
        place = Place(root)
        place.home.mkdir()
        if case.populated:
            shutil.copyfile(template, place.db)
        (root / "cache").mkdir()
        (root / "config").mkdir()
        (root / "work").mkdir()
        (root / "a-file").write_text("not a folder")
        for name, content in case.files:
            (root / name).write_bytes(content)
        before = _fingerprint(place)
        env: dict[str, str | None] = {key: None for key in KEYS}
        env |= {
            "AVIBE_HOME": str(place.home),
            "AVIBE_MODEL_CACHE": str(root / "cache"),
            "AVIBE_MODEL": "embedded",
            "XDG_CONFIG_HOME": str(root / "config"),
            "COLUMNS": "200",
        }
        env |= {key: value.replace("{dir}", str(root)) for key, value in case.env}
        args = [arg.replace("{dir}", str(root)) for arg in case.args]
        result = CliRunner().invoke(app, args, env=env)
        problems = _problems(result.exit_code, result.stderr, result.stdout, result.exception)
        after = _fingerprint(place)
        if after != before:
            problems.append(f"the record changed: {before} -> {after}")
        return Outcome(result.exit_code, result.stderr, result.stdout, problems)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _problems(code: int, stderr: str, stdout: str, exception: BaseException | None) -> list[str]:
    problems = []
    if code != 2:
        problems.append(f"exit code {code}, not 2")
    lines = stderr.splitlines()
    if len(lines) != 1 or not lines[0].startswith("vibe: "):
        problems.append(f"stderr is not one `vibe: ` line: {stderr[:300]!r}")
    if "Traceback" in stderr + stdout:
        problems.append("a traceback was printed")
    if "internal error" in stderr:
        problems.append("an internal error (an exception the CLI did not expect)")
    if exception is not None and not isinstance(exception, SystemExit):
        problems.append(f"an exception escaped: {exception!r}")
    return problems


def check(case: Case, template: Path) -> list[str]:
    return run_case(case, template).problems


# -- generated bad values ------------------------------------------------------------------------------

# Text that no number parser reads as a number: no digit of any script (and "1_000" is not possible).
_garbage = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12).filter(
    lambda s: not any(c.isnumeric() for c in s)
)
_control_text = st.text(
    st.characters(categories=["Cc"], exclude_characters="\x00"), min_size=1, max_size=3
).map(lambda c: f"s{c}x")
_bad_session = st.one_of(
    st.just("s-20261130-nosuch"),
    _control_text,
    st.just("with space"),
    st.just("x" * 200),
    st.just("\udcff"),  # an undecodable byte from the command line
)
_bad_window = st.one_of(
    st.integers(max_value=255), st.integers(min_value=2**31), st.just(BIG * 10), _garbage
).map(str)
_bad_steps = st.one_of(st.integers(max_value=0), st.integers(min_value=10_001), _garbage).map(str)
_bad_workdir = st.sampled_from(["{dir}/nowhere", "{dir}/a-file", "{dir}/a-file/below"])
_bad_model = st.one_of(
    st.builds(
        lambda s: f"nosuch-{s}", st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=8)
    ),
    st.just("scripted"),
    st.just("local:"),
    st.just("local:{dir}/missing.gguf"),
    st.just("zz-not-a-provider/model"),
    st.just("ollama/qwen2.5-coder"),  # a server's model without AVIBE_MODEL_WINDOW
    st.just("openai/gpt-4o"),  # a hosted model without its key
    st.just(""),
)
_bad_settings = st.sampled_from(
    [
        ("AVIBE_HOME", "{dir}/a-file"),
        ("AVIBE_HOME", "{dir}/a-file/home"),
        ("AVIBE_DATABASE_URL", "sqlite://"),
        ("AVIBE_DATABASE_URL", "sqlite:///:memory:"),
        ("AVIBE_DATABASE_URL", "postgresql://u:p@[::1/db"),
        ("AVIBE_DATABASE_URL", "mysql://u:p@h/d"),
        ("AVIBE_DATABASE_URL", "not a url"),
        ("AVIBE_DATABASE_URL", "sqlite:///{dir}/a-file/avibe.db"),
        ("AVIBE_MODEL_WINDOW", "0"),
        ("AVIBE_MODEL_WINDOW", "lots"),
        ("AVIBE_MODEL_WINDOW", "99999999999999999999"),
        ("AVIBE_SANDBOX", "nope"),
        ("AVIBE_USER", "kofi\x1b[2J"),
    ]
)
_bad_time = st.one_of(
    st.just("9999-12-31T23:59:59-05:00"),
    st.just("0001-01-01T00:00:00+05:00"),
    st.just("2026-13-01"),
    _garbage,
)
_bad_seq = st.one_of(st.integers(max_value=0), st.integers(min_value=BIG), _garbage).map(str)


def _option(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, ...]]:
    return values.map(lambda value: (name, value))


def _settings_case(args: tuple[str, ...]) -> st.SearchStrategy[Case]:
    return _bad_settings.map(lambda pair: Case(args, env=(pair,), why=f"bad setting {pair[0]}"))


_TASK = "Tidy the README"


def _run_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--window", _bad_window),
        _option("--max-steps", _bad_steps),
        _option("--session", _bad_session),
        _option("--workdir", _bad_workdir),
        _option("--model", _bad_model),
    )
    return st.one_of(
        st.builds(lambda extra, pop: Case(("run", _TASK, *extra), populated=pop), bad, st.booleans()),
        st.sampled_from(["", "   "]).map(lambda task: Case(("run", task))),
        st.booleans().map(
            lambda pop: Case(("run", _TASK), populated=pop, why="embedded model not installed")
        ),
        _settings_case(("run", _TASK)),
    )


def _demo_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--window", _bad_window),
        _option("--max-steps", _bad_steps),
        _option("--workdir", st.sampled_from(["{dir}/a-file", "{dir}/a-file/below", "{dir}/no/such/parent"])),
        _option("--model", _bad_model),
    )
    return st.one_of(bad.map(lambda extra: Case(("demo", *extra))), _settings_case(("demo",)))


def _log_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--from-seq", _bad_seq),
        _option("--to-seq", _bad_seq),
        _option("--since", _bad_time),
        _option("--until", _bad_time),
        _option("--kind", _garbage.filter(lambda s: s.strip().lower() not in KINDS)),
        _option("--limit", st.one_of(st.integers(max_value=-1), st.integers(min_value=BIG)).map(str)),
        _option("--session", _bad_session),
        st.just(("--from-seq", "5", "--to-seq", "2")),
        st.just(("--grep", "a\x00b")),
    )
    return st.one_of(
        st.builds(lambda extra, pop: Case(("log", *extra), populated=pop), bad, st.booleans()),
        st.just(Case(("log",), populated=False, why="no record yet")),
        _settings_case(("log",)),
    )


def _sessions_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        st.sampled_from(
            [("sessions", "--jsn"), ("sessions", "extra"), ("sessions", "--json", "--json=1")]
        ).map(Case),
        _settings_case(("sessions",)),
    )


def _checkpoints_cases() -> st.SearchStrategy[Case]:
    number = st.one_of(st.integers(max_value=0), st.integers(min_value=2, max_value=BIG * 2), _garbage).map(
        str
    )
    bad = st.one_of(
        _option("--show", number),
        st.tuples(number, st.just("1")).map(lambda pair: ("--diff", *pair)),
        _option("--session", _bad_session),
    )
    return st.one_of(
        st.builds(lambda extra, pop: Case(("checkpoints", *extra), populated=pop), bad, st.booleans()),
        st.just(Case(("checkpoints",), populated=False, why="no record yet")),
        _settings_case(("checkpoints",)),
    )


def _skill_cases() -> st.SearchStrategy[Case]:
    name = st.one_of(
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
    )
    return st.one_of(
        name.map(lambda n: Case(("skill", "load", f"no-such-skill-{n}"))),
        st.sampled_from(["", "a/b", "\x1b[2J"]).map(lambda n: Case(("skill", "load", n))),
        _bad_workdir.map(lambda w: Case(("skill", "list", "--workdir", w))),
        st.just(Case(("skill", "nosuch"))),
        _settings_case(("skill", "list")),
    )


def _models_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        _bad_model.filter(lambda m: m not in {"openai/gpt-4o", "local:{dir}/missing.gguf"}).map(
            lambda m: Case(("models", m) if m else ("models", "--", m))
        ),
        _garbage.map(lambda tier: Case(("models", "install", f"tier-{tier}"))),
        st.just(Case(("models", "install", "--find-links", "{dir}/nowhere"))),
        _settings_case(("models",)),
    )


def _claude_line(text: str) -> bytes:
    line = {"type": "user", "message": {"role": "user", "content": text}, "timestamp": "2026-11-20T09:00:00Z"}
    return json.dumps(line).encode() + b"\n"


_IMPORT_FILES: list[tuple[str, bytes]] = [
    ("int", b"5"),
    ("int", b"5\n6\n"),
    ("list", b"[1, 2]"),
    ("non-utf8", b"\xff\xfe\x00bad"),
    ("deep", b"[" * 100_000),
    ("deep-lines", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    ("nul-half-way", _claude_line("first message") + _claude_line("a NUL \x00 here") + _claude_line("third")),
    ("empty", b""),
    (
        "opencode-1e20",
        json.dumps(
            {
                "info": {"id": "ses_x"},
                "messages": [
                    {
                        "info": {"role": "user", "time": {"created": 1e20}},
                        "parts": [{"type": "text", "text": "hi"}],
                    }
                ],
            }
        ).encode(),
    ),
    (
        "opencode-nan",
        b'{"info": {"id": "ses_x"}, "messages": [{"info": {"role": "user", "time": {"created": NaN}},'
        b' "parts": [{"type": "text", "text": "hi"}]}]}',
    ),
    ("opencode-storage-relative", json.dumps({"id": "ses_rel", "title": "t"}).encode()),
]


def _import_cases() -> st.SearchStrategy[Case]:
    def with_file(pair: tuple[str, bytes], fmt: str | None) -> Case:
        name = f"{pair[0]}.json"
        extra = ("--format", fmt) if fmt else ()
        return Case(("import", f"{{dir}}/{name}", *extra), files=((name, pair[1]),), why=pair[0])

    return st.one_of(
        st.builds(
            with_file, st.sampled_from(_IMPORT_FILES), st.sampled_from([None, "claude", "codex", "opencode"])
        ),
        st.sampled_from(["{dir}/nowhere.jsonl", "{dir}/work"]).map(lambda p: Case(("import", p))),
        _garbage.map(lambda fmt: Case(("import", "{dir}/a-file", "--format", f"x{fmt}"))),
        _settings_case(("import", "{dir}/a-file")),
    )


def _eval_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--k", st.one_of(st.integers(max_value=0), st.integers(min_value=65), _garbage).map(str)),
        _option("--seed", st.one_of(st.integers(max_value=-1), st.integers(min_value=BIG)).map(str)),
        _option("--window", _bad_window),
        _option("--threshold", st.sampled_from(["0", "-0.5", "1.5", "nan", "inf", "half"])),
        _option("--jobs", st.sampled_from(["0", "-1", "999", "x"])),
        _option("--type", _garbage.map(lambda s: f"t-{s}")),
        _option("--strategy", _garbage.map(lambda s: f"s-{s}")),
        _option("--scenario", st.sampled_from(["{dir}/nowhere.json", "{dir}/a-file", "{dir}/work"])),
        _option("--session", _bad_session),
        _option("--model", _bad_model.filter(lambda m: m not in {"openai/gpt-4o", "ollama/qwen2.5-coder"})),
        _option("--out", st.sampled_from(["{dir}/a-file", "{dir}/a-file/out"])),
    )
    return st.one_of(
        st.builds(lambda extra: Case(("eval", "-t", "queue", "-s", "truncate", *extra)), bad),
        _settings_case(("eval", "-t", "queue")),
    )


def _eval_scenarios_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option(
            "--size", st.one_of(st.integers(max_value=-1), st.integers(min_value=10_001), _garbage).map(str)
        ),
        _option("--type", _garbage.map(lambda s: f"t-{s}")),
        _option("--seed", st.one_of(st.integers(max_value=-1), st.integers(min_value=BIG)).map(str)),
    )
    return st.one_of(
        bad.map(lambda extra: Case(("eval-scenarios", "{dir}/out", *extra))),
        st.sampled_from(["{dir}/a-file", "{dir}/a-file/out"]).map(lambda out: Case(("eval-scenarios", out))),
    )


_SESSION = "s-20261130-aaaaaa"  # the populated record's session
_bad_every = st.one_of(_garbage, st.sampled_from(["0s", "0.5s", "400d", "-5m", "5 parsecs"]))


def _serve_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--window", _bad_window),
        _option("--max-steps", _bad_steps),
        _option("--session", _bad_session),
        _option("--workdir", _bad_workdir),
        _option("--model", _bad_model),
        _option("--port", st.sampled_from(["0", "65536", "-1", "http"])),
    )
    return st.one_of(
        st.builds(lambda extra: Case(("serve", *extra)), bad),
        st.just(Case(("serve", "--exit-when-idle"), why="--exit-when-idle without --session")),
        st.sampled_from(["nope", "http://h", "https://h:1", "http://h:1/x", "http://h:99999"]).map(
            lambda url: Case(("serve",), env=(("AVIBE_SERVE_URL", url),), why="bad serve url")
        ),
        _settings_case(("serve",)),
    )


def _send_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        _bad_session.map(lambda s: Case(("send", "--to", s, "hello"))),
        st.sampled_from(["", "   "]).map(lambda text: Case(("send", "--to", _SESSION, text))),
        st.booleans().map(lambda pop: Case(("send", "--to", "s-20261130-nosuch", "hi"), populated=pop)),
        _settings_case(("send", "--to", _SESSION, "hi")),
    )


def _watch_cases() -> st.SearchStrategy[Case]:
    add = ("watch", "add", "ci", "--session", _SESSION)
    return st.one_of(
        _bad_every.map(lambda every: Case((*add, "--every", every, "--command", "make test"))),
        st.just(Case(add, why="nothing to watch")),
        st.just(Case((*add, "--file", "a", "--url", "http://x/"), why="two things to watch")),
        st.sampled_from(["ftp://x", "x", "file:///etc"]).map(lambda url: Case((*add, "--url", url))),
        _bad_session.map(lambda s: Case(("watch", "add", "ci", "--session", s, "--file", "a"))),
        st.sampled_from(["", "  ", "a\x1bb"]).map(
            lambda name: Case(("watch", "add", name, "--session", _SESSION, "--file", "a"))
        ),
        st.booleans().map(lambda pop: Case(("watch", "rm", "w-nosuch"), populated=pop)),
        _settings_case((*add, "--file", "a")),
    )


def _timer_cases() -> st.SearchStrategy[Case]:
    add = ("timer", "add", "standup", "--session", _SESSION, "--text", "stand up")
    return st.one_of(
        _bad_every.map(lambda every: Case((*add, "--every", every))),
        st.one_of(_garbage, st.just("2026-13-01")).map(lambda at: Case((*add, "--at", at))),
        st.sampled_from(["* * *", "61 * * * *", "every day"]).map(lambda cron: Case((*add, "--cron", cron))),
        st.just(Case(add, why="no --at, --every or --cron")),
        st.just(Case((*add, "--every", "5m", "--cron", "0 9 * * 1-5"), why="two schedules")),
        st.just(Case(("timer", "add", "t", "--session", _SESSION, "--text", " ", "--every", "5m"))),
        st.booleans().map(lambda pop: Case(("timer", "rm", "t-nosuch"), populated=pop)),
        _settings_case((*add, "--every", "5m")),
    )


def _callback_cases() -> st.SearchStrategy[Case]:
    add = ("callback", "add", "build", "--session", _SESSION)
    return st.one_of(
        st.sampled_from(["0", "-1", "99999999999"]).map(lambda n: Case((*add, "--max-bytes", n))),
        st.sampled_from(["0", "-1", "1000001"]).map(lambda n: Case((*add, "--per-minute", n))),
        _bad_session.map(lambda s: Case(("callback", "add", "build", "--session", s))),
        st.booleans().map(
            lambda pop: Case(("callback", "add", "b", "--session", "s-20261130-nosuch"), populated=pop)
        ),
        st.booleans().map(lambda pop: Case(("callback", "rm", "cb-nosuch"), populated=pop)),
        st.sampled_from(["nosuch", "slack", "stripe", "standard-webhooks"]).map(
            lambda kind: Case((*add, "--kind", kind))  # unknown, or a service that makes its own secret
        ),
        st.sampled_from([b"sk_live_not_a_signing_secret", b"whsec_!!", b"\xff\xfe"]).map(
            lambda key: Case((*add, "--kind", "stripe", "--secret-file", "{dir}/s"), files=(("s", key),))
        ),
        st.just(Case((*add, "--kind", "github", "--secret-file", "{dir}/missing"))),
        _settings_case(add),
    )


def _feeds_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        _bad_session.filter(lambda s: s != "s-20261130-nosuch").map(
            lambda s: Case(("feeds", "--session", s))
        ),
        _settings_case(("feeds",)),
    )


def _agents_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        st.sampled_from(["{dir}/no-npm", "{dir}/a-file"]).map(
            lambda npm: Case(("agents", "install", "--npm", npm))
        ),
        _settings_case(("agents",)),
        _settings_case(("agents", "install")),
    )


def _mcp_cases() -> st.SearchStrategy[Case]:
    """Nothing is written to the config file on a bad `vibe mcp` (its folder starts empty)."""
    add = ("mcp", "add")
    return st.one_of(
        st.sampled_from(["", "a b", "x_", "x.y", "-", "\u00e9t\u00e9"]).map(
            lambda name: Case((*add, name, "--", "python3", "server.py"), why="bad server name")
        ),
        st.just(Case((*add, "tracker"), why="no command and no --url")),
        st.just(Case((*add, "tracker", "--url", "http://127.0.0.1:1/mcp", "--", "python3"), why="both")),
        st.sampled_from(["ftp://x", "not a url", "http://"]).map(lambda url: Case((*add, "t", "--url", url))),
        st.sampled_from(["NOEQUALS", "=v", ""]).map(lambda pair: Case((*add, "t", "--env", pair, "--", "x"))),
        st.sampled_from(["0", "-1", "nan", "inf"]).map(
            lambda t: Case((*add, "t", "--timeout", t, "--", "x"))
        ),
        st.just(Case(("mcp", "remove", "nosuch"), why="no such server")),
        st.sampled_from(
            ["{dir}/nowhere.json", "{dir}/a-file", "{dir}/j.json", "{dir}/c.toml", "{dir}/work"]
        ).map(
            lambda source: Case(
                ("mcp", "import", source), files=(("j.json", b"{not json"), ("c.toml", b"[mcp_servers\n"))
            )
        ),
        _settings_case(("mcp", "list")),
    )


def _config_cases() -> st.SearchStrategy[Case]:
    verbs = st.sampled_from(["show-tightening", "forget-tightening"])
    homes = st.sampled_from([("AVIBE_HOME", "{dir}/a-file"), ("AVIBE_HOME", "{dir}/a-file/home")])
    return st.one_of(
        st.builds(
            lambda verb, folder: Case(("config", verb, "--project", folder)),
            verbs,
            st.sampled_from(["{dir}/nowhere", "{dir}/a-file", "\udcff"]),
        ),
        st.builds(lambda verb, home: Case(("config", verb), env=(home,), why="bad home"), verbs, homes),
    )


def _chat_cases() -> st.SearchStrategy[Case]:
    bad = st.one_of(
        _option("--window", _bad_window),
        _option("--max-steps", _bad_steps),
        _option("--session", _bad_session),
        _option("--workdir", _bad_workdir),
        _option("--model", _bad_model),
    )
    return st.one_of(
        st.builds(lambda extra, pop: Case(("chat", *extra), populated=pop), bad, st.booleans()),
        st.just(Case(("chat", "--demo", "--continue"), why="--demo cannot resume")),
        st.just(Case(("chat", "--continue"), why="no session ran in this folder")),
        st.just(Case(("chat", "--session", "s1", "--continue"), why="two ways to choose")),
        st.just(Case(("chat", "a task"), why="the chat takes no task")),
        st.just(Case(("chat",), why="no terminal: the chat needs one")),
        _settings_case(("chat",)),
    )


def _inspect_cases() -> st.SearchStrategy[Case]:
    """Every case fails before the inspector serves (a valid one would serve until stopped)."""
    return st.one_of(
        _bad_session.map(lambda s: Case(("inspect", "--session", s, "--no-browser"))),
        st.sampled_from(["65536", "-1", "http"]).map(
            lambda p: Case(("inspect", "--port", p, "--no-browser"))
        ),
        st.sampled_from(["{dir}/nowhere", "{dir}/a-file"]).map(
            lambda d: Case(("inspect", "--eval", d, "--no-browser"), why="--eval is not a folder")
        ),
        st.just(Case(("inspect", "--no-browser"), populated=False, why="no record and no --eval")),
        st.just(Case(("inspect", "--latest", "--no-browser"), populated=False, why="no record")),
        _settings_case(("inspect", "--no-browser")),
    )


STRATEGIES: dict[str, st.SearchStrategy[Case]] = {
    "run": _run_cases(),
    "demo": _demo_cases(),
    "log": _log_cases(),
    "sessions": _sessions_cases(),
    "checkpoints": _checkpoints_cases(),
    "skill": _skill_cases(),
    "models": _models_cases(),
    "import": _import_cases(),
    "eval": _eval_cases(),
    "eval-scenarios": _eval_scenarios_cases(),
    "serve": _serve_cases(),
    "send": _send_cases(),
    "watch": _watch_cases(),
    "timer": _timer_cases(),
    "callback": _callback_cases(),
    "feeds": _feeds_cases(),
    "agents": _agents_cases(),
    "inspect": _inspect_cases(),
    "chat": _chat_cases(),
    "config": _config_cases(),
    "mcp": _mcp_cases(),
}


def test_every_subcommand_has_bad_inputs() -> None:
    commands = {info.name for info in app.registered_commands} | {g.name for g in app.registered_groups}
    assert set(STRATEGIES) == set(COMMANDS) == commands


@pytest.mark.parametrize("command", COMMANDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    command: str, data: st.DataObject, template: Path
) -> None:
    case = data.draw(STRATEGIES[command], label="case")
    outcome = run_case(case, template)
    assert outcome.problems == [], f"{case}: {outcome.problems}; stderr={outcome.stderr!r}"


def iter_cases(command: str, count: int) -> Iterator[Case]:
    """`count` generated cases of one command (for the tally script)."""
    for _ in range(count):
        yield STRATEGIES[command].example()
