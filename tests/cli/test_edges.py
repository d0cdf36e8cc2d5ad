"""The CLI's edges (10): the one error boundary and exit-code rule,
read-only commands that leave the database file as it was, terminal-safe checkpoints, the validated
run/demo options and the model pre-flight check, settings from the environment and config.toml files,
masked URLs, `--version` and shell completion. Real SQLite files under a temp AVIBE_HOME."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

import avibe.cli.log as log_cli
from avibe.cli import _Vibe, app
from avibe.cli.options import (
    DemoWorkdirOpt,
    ModelOpt,
    SessionOpt,
    StepsOpt,
    TaskArg,
    WindowOpt,
    WorkdirOpt,
    preflight_model,
    require_session,
    terminal_safe,
)
from avibe.config import load_settings, masked_url
from avibe.errors import AuthError, ConfigError, ModelUnavailable, UnknownSession
from avibe.ingress import deliver
from avibe.ports import StoredCheckpoint
from avibe.record.entries import Source
from avibe.store import open_store

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str | None]:
    return {
        "AVIBE_HOME": str(home),
        "AVIBE_DATABASE_URL": None,
        "AVIBE_MODEL_CACHE": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "200",
    }


def _vibe(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _one_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vibe: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def _session_with_checkpoints(db: Path, minds: list[str], upto: list[int] | None = None) -> str:
    with open_store(f"sqlite:///{db}") as store:
        session = store.create_session("cp").id
        for n in range(3):
            deliver(store, session, Source("user", "kofi"), f"message {n}", at=T0)
        for mind, seq in zip(minds, upto or [2] * len(minds), strict=True):
            store.save_checkpoint(StoredCheckpoint(session, 0, T0, mind, [], "scene", seq))
    return session


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the boundary and the exit-code rule ---------------------------------------------------------------


def test_usage_errors_are_one_vibe_line_with_the_help_to_read(env: dict[str, str | None]) -> None:
    line = _one_line(_vibe(env, "log", "--frm", "1"))
    assert "No such option: --frm" in line and "`vibe log --help`" in line
    assert "No such command 'nosuch'" in _one_line(_vibe(env, "nosuch"))


def test_an_unexpected_exception_is_one_line_naming_the_log_which_holds_the_traceback(
    env: dict[str, str | None], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("boom \x1b[2J")

    monkeypatch.setattr(log_cli, "_open_record", broken)
    line = _one_line(_vibe(env, "log"))
    log_file = home / "logs" / "avibe.log"
    assert line == f"vibe: internal error (RuntimeError: boom \\x1b[2J); the traceback is in {log_file}"
    logged = log_file.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in logged and "RuntimeError: boom" in logged


def test_os_errors_are_one_line(env: dict[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    def denied() -> None:
        raise PermissionError(13, "Permission denied", "/root/x")

    monkeypatch.setattr(log_cli, "_open_record", denied)
    assert _one_line(_vibe(env, "log")) == "vibe: Permission denied: /root/x"


def test_the_exit_code_rule(env: dict[str, str | None], home: Path) -> None:
    """0: done (an empty list is an answer); 2: could not (bad input, or the thing it is about is missing)."""
    listed = _vibe(env, "sessions")
    assert (listed.exit_code, listed.stdout.strip()) == (0, "No sessions yet.")
    assert "no record yet" in _one_line(_vibe(env, "log"))
    assert "no record yet" in _one_line(_vibe(env, "checkpoints"))
    assert _one_line(_vibe(env, "models", "nosuch")).startswith("vibe: unknown model 'nosuch'")
    assert not home.exists(), "no command above created the home"
    _session_with_checkpoints(home / "avibe.db", [])
    empty = _vibe(env, "checkpoints")
    assert (empty.exit_code, empty.stdout.strip()) == (0, "(no checkpoints in this session)")
    assert "no checkpoint 1" in _one_line(_vibe(env, "checkpoints", "--show", "1"))


def test_version_help_and_completion(env: dict[str, str | None]) -> None:
    from importlib.metadata import version

    for flag in ("--version", "-v"):
        shown = _vibe(env, flag)
        assert (shown.exit_code, shown.stdout.strip()) == (0, f"vibe (avibe) {version('avibe')}")
    for args in (["-h"], ["run", "-h"], ["chat", "-h"], ["sessions", "-h"]):
        helped = _vibe({**env, "NO_COLOR": "1", "TERM": "dumb"}, *args)
        assert helped.exit_code == 0 and f"Usage: vibe {' '.join(args[:-1])}".strip() in helped.stdout
    bare = _vibe(env)
    assert bare.exit_code == 0 and "Usage: vibe" in bare.stdout and bare.stderr == ""
    helped = _vibe({**env, "NO_COLOR": "1", "TERM": "dumb"}, "--help")
    assert "--install-completion" in helped.stdout and "--show-completion" in helped.stdout


# -- read-only commands leave the file as it was -------------------------------------------------------


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_read_only_commands_change_nothing_in_the_database_file(
    env: dict[str, str | None], home: Path, journal: str
) -> None:
    db = home / "avibe.db"
    session = _session_with_checkpoints(db, ["## Mission\n- a", "## Mission\n- a\n- b"], [1, 2])
    if journal == "delete":  # a record another tool left in rollback-journal mode must stay so
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=DELETE")
    before, files = _digest(db), sorted(p.name for p in home.iterdir())
    for args in (
        ["log"],
        ["log", "--user", "--json"],
        ["sessions"],
        ["checkpoints"],
        ["checkpoints", "-s", session, "--show", "2"],
        ["checkpoints", "--diff", "1", "2"],
        ["log", "--session", "s-nope"],
    ):
        result = _vibe(env, *args)
        assert result.exit_code in (0, 2), result.output
    assert _digest(db) == before
    assert sorted(p.name for p in home.iterdir()) == files, "no -wal, -shm or journal file left behind"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == journal


# -- checkpoints: listed once, shown terminal-safe -----------------------------------------------------


def test_a_checkpoint_stored_again_is_listed_once_and_kept_in_json(
    env: dict[str, str | None], home: Path
) -> None:
    _session_with_checkpoints(
        home / "avibe.db", ["## Mission\n- a", "## Mission\n- b", "## Mission\n- b"], [1, 2, 2]
    )
    listed = _vibe(env, "checkpoints")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["#1", "#2"], listed.stdout
    assert "#2 (= #3)" in lines[1]
    assert [c["number"] for c in json.loads(_vibe(env, "checkpoints", "--json").stdout)] == [1, 2, 3]


def test_checkpoint_show_and_diff_render_control_characters_visibly(
    env: dict[str, str | None], home: Path
) -> None:
    evil = "## Mission\n- clear \x1b[2J\x1b]0;pwned\x07 here"
    _session_with_checkpoints(home / "avibe.db", ["## Mission\n- a", evil], [1, 2])
    shown = _vibe(env, "checkpoints", "--show", "2")
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "- clear \\x1b[2J\\x1b]0;pwned\\x07 here" in shown.stdout
    diff = _vibe(env, "checkpoints", "--diff", "1", "2")
    assert diff.exit_code == 0 and "\x1b" not in diff.stdout
    assert "+- clear \\x1b[2J" in diff.stdout and "-- a" in diff.stdout
    raw = json.loads(_vibe(env, "checkpoints", "--show", "2", "--json").stdout)
    assert raw["mind"] == evil, "--json keeps the text as stored"


def test_terminal_safe_keeps_lines_and_shows_everything_else() -> None:
    assert terminal_safe("a\tb\nc\x1b[0m\x7f\x9b\udcff") == "a\tb\nc\\x1b[0m\\x7f\\x9b\\udcff"
    assert terminal_safe("evil\u202etxt.exe\u2028next") == "evil\\u202etxt.exe\\u2028next"


# -- the run/demo options, on a command built like `vibe run` ------------------------------------------


@pytest.fixture
def run_like() -> typer.Typer:
    """A `run` and a `demo` built from cli/options.py, behind the real boundary; they echo what they got."""
    built = typer.Typer(cls=_Vibe)

    @built.command("run")
    def run(
        task: TaskArg,
        model: ModelOpt = None,
        window: WindowOpt = None,
        session: SessionOpt = None,
        workdir: WorkdirOpt = Path("."),
        max_steps: StepsOpt = 30,
    ) -> None:
        typer.echo(json.dumps([task, model, window, session, str(workdir), max_steps]))

    @built.command("demo")
    def demo(workdir: DemoWorkdirOpt = None) -> None:
        typer.echo(str(workdir))

    return built


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "  "], "the task is empty"),
        (["run", "t", "--window", "255"], "255 is out of range; a window is 256"),
        (["run", "t", "--window", "99999999999999999999"], "is out of range"),
        (["run", "t", "--window", "big"], "--window"),
        (["run", "t", "--max-steps", "0"], "0 is out of range; allow 1 to 10,000"),
        (["run", "t", "--max-steps", "10001"], "10001 is out of range"),
        (["run", "t", "--session", "\udcff"], "'\\udcff' is not a session id"),
        (["run", "t", "--session", "a b"], "is not a session id"),
        (["run", "t", "--session", "x" * 129], "is not a session id"),
        (["run", "t", "--workdir", "{tmp}/nowhere"], "does not exist"),
        (["run", "t", "--workdir", "{tmp}/file"], "is not a folder"),
        (["run", "t", "--model", "nosuch-model"], "unknown model 'nosuch-model'"),
        (["run", "t", "--model", "scripted"], "test model"),
        (["demo", "--workdir", "{tmp}/file"], "is not a folder"),
        (["demo", "--workdir", "{tmp}/file/below"], "its parent folder"),
    ],
)
def test_run_and_demo_options_refuse_bad_values_while_parsing(
    run_like: typer.Typer, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(run_like, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert message in _one_line(result)
    assert result.stdout == "", "the command body never ran"


def test_run_and_demo_options_pass_good_values(run_like: typer.Typer, tmp_path: Path) -> None:
    args = [
        "run",
        "tidy",
        "-m",
        "openai/gpt-4o",
        "--window",
        "256",
        "-s",
        "s-20261130-aaaaaa",
        "-C",
        str(tmp_path),
    ]
    result = CliRunner().invoke(run_like, [*args, "--max-steps", "10000"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        "tidy",
        "openai/gpt-4o",
        256,
        "s-20261130-aaaaaa",
        str(tmp_path),
        10000,
    ]
    new = CliRunner().invoke(run_like, ["demo", "--workdir", str(tmp_path / "new")])
    assert (new.exit_code, new.stdout.strip()) == (0, str(tmp_path / "new"))


# -- the model pre-flight check ------------------------------------------------------


@pytest.fixture
def refusals() -> Iterator[list[str]]:
    """What the pre-flight check logged (U2: a refusal also goes to the log)."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    logger = logging.getLogger("avibe.cli")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def test_preflight_names_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusals: list[str]
) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    settings = load_settings({"AVIBE_HOME": str(tmp_path), "AVIBE_MODEL_CACHE": str(tmp_path / "cache")})
    with pytest.raises(ModelUnavailable, match="vibe models install"):
        preflight_model("embedded", settings)
    with pytest.raises(ModelUnavailable, match=r"model file .*missing\.gguf does not exist"):
        preflight_model(f"local:{tmp_path / 'missing.gguf'}", settings)
    with pytest.raises(ConfigError, match="set AVIBE_MODEL_WINDOW"):
        preflight_model("ollama/qwen2.5-coder", settings)
    with pytest.raises(AuthError, match="set OPENAI_API_KEY"):
        preflight_model("openai/gpt-4o", settings)
    with pytest.raises(ModelUnavailable, match="unknown model"):
        preflight_model("nosuch", settings)
    assert len(refusals) == 5 and "OPENAI_API_KEY" in refusals[3]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    preflight_model("openai/gpt-4o", settings)
    windowed = load_settings({"AVIBE_HOME": str(tmp_path), "AVIBE_MODEL_WINDOW": "32768"})
    preflight_model("ollama/qwen2.5-coder", windowed)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    preflight_model(f"local:{gguf}", settings)


def test_require_session_never_creates_the_record(home: Path) -> None:
    settings = load_settings({"AVIBE_HOME": str(home)})
    with pytest.raises(Exception, match="there is no record yet"):
        require_session(settings, "s-20261130-nosuch")
    assert not home.exists()
    session = _session_with_checkpoints(home / "avibe.db", [])
    require_session(settings, session)
    with pytest.raises(UnknownSession):
        require_session(settings, "s-20261130-nosuch")


# -- settings: environment, config.toml files, masked URLs ---------------------------------------------


def test_settings_come_from_the_environment_then_the_project_then_the_user_file(tmp_path: Path) -> None:
    """A trusted project's config applies in full, between the environment and the user's file; an
    untrusted one may only tighten (tests/security/test_config_trust.py)."""
    project, user = tmp_path / "project", tmp_path / "user.toml"
    (project / ".avibe").mkdir(parents=True)
    (project / ".avibe" / "config.toml").write_text('model = "openai/gpt-4o"\nmodel_window = 64000\n')
    mine = f'model = "embedded-1.5b"\nuser = "kofi"\nhome = "{tmp_path / "h"}"\nsandbox = "read-only"\n'
    user.write_text(mine)
    untrusted = load_settings({}, project_dir=project, user_config=user)
    assert (untrusted.model, untrusted.model_window) == ("embedded-1.5b", 64_000)  # a window only caps
    user.write_text(f'trusted_projects = ["{project}"]\n{mine}')
    found = load_settings({}, project_dir=project, user_config=user)
    assert (found.model, found.model_window, found.user_name) == ("openai/gpt-4o", 64_000, "kofi")
    assert (found.home, found.sandbox) == (tmp_path / "h", "read-only")
    assert found.database_url == f"sqlite:///{tmp_path / 'h' / 'avibe.db'}"
    env = load_settings(
        {"AVIBE_MODEL": "embedded", "AVIBE_USER": "ada"}, project_dir=project, user_config=user
    )
    assert (env.model, env.user_name, env.model_window) == ("embedded", "ada", 64_000)
    alone = load_settings({}, project_dir=tmp_path / "elsewhere", user_config=tmp_path / "none.toml")
    assert (alone.model, alone.model_window) == ("embedded-1.5b", None)  # the default tier


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model = \n", "is not valid TOML"),
        ("modle = 'x'\n", "unknown setting 'modle' in"),
        ("model_window = 'lots'\n", "model_window='lots' is not a whole number"),
        ("model = 5\n", "model: Input should be a valid string"),
        ("sandbox = 'none'\n", "is not a sandbox mode"),
    ],
)
def test_a_bad_config_file_names_itself(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / ".avibe").mkdir()
    (tmp_path / ".avibe" / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings({}, project_dir=tmp_path, user_config=tmp_path / "none.toml")
    assert str(tmp_path / ".avibe" / "config.toml") in str(caught.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AVIBE_HOME": "{tmp}/file"}, "AVIBE_HOME='{tmp}/file' is not a folder"),
        ({"AVIBE_HOME": "{tmp}/file/home"}, "would be inside {tmp}/file, which is not a folder"),
        ({"AVIBE_DATABASE_URL": "sqlite://"}, "in-memory database"),
        ({"AVIBE_DATABASE_URL": "sqlite:///:memory:"}, "in-memory database"),
        (
            {"AVIBE_DATABASE_URL": "postgresql://u:s3cret@[::1/db"},
            "'postgresql://u:***@[::1/db' is not a database URL",
        ),
        ({"AVIBE_DATABASE_URL": "mysql://u:s3cret@h/d"}, "'mysql://u:***@h/d' is not supported"),
        ({"AVIBE_DATABASE_URL": "sqlite:///{tmp}/file/avibe.db"}, "would be inside {tmp}/file, not a folder"),
        ({"AVIBE_MODEL_WINDOW": "255"}, "AVIBE_MODEL_WINDOW=255 is out of range"),
        ({"AVIBE_MODEL_WINDOW": "99999999999999999999"}, "is not a whole number"),
        ({"AVIBE_USER": "kofi\x1b[2J"}, "AVIBE_USER='kofi\\x1b[2J' contains control"),
    ],
)
def test_bad_settings_are_one_clear_line(tmp_path: Path, env: dict[str, str], message: str) -> None:
    (tmp_path / "file").write_text("x")
    filled = {key: value.replace("{tmp}", str(tmp_path)) for key, value in env.items()}
    with pytest.raises(ConfigError) as caught:
        load_settings(filled, project_dir=tmp_path, user_config=tmp_path / "none.toml")
    assert message.replace("{tmp}", str(tmp_path)) in str(caught.value)
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (
            "postgresql+psycopg://avibe:s3cret@db.example:5432/avibe",
            "postgresql+psycopg://avibe:***@db.example:5432/avibe",
        ),
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:s3cret@[::1/db", "postgresql://u:***@[::1/db"),
        ("sqlite:////tmp/avibe.db", "sqlite:////tmp/avibe.db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_masked_url_never_shows_a_password(url: str, masked: str) -> None:
    assert masked_url(url) == masked
