"""`vibe eval` and `vibe import` through the real CLI, with the model seam set to the strict scripted model
(the embedded model is exercised by the `embedded`-marked smoke test, not here)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avibe.cli import app
from avibe.config import Settings
from avibe.ports import ModelClient, TokenCounter
from avibe.providers.scripted import ScriptedModel

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    counter: TokenCounter,
    scripted: Callable[[int], ScriptedModel],
) -> dict[str, str]:
    import avibe.cli.eval as eval_cli

    opened: list[str] = []

    def open_model(name: str, settings: Settings) -> ModelClient:
        opened.append(name)
        return scripted(500)

    monkeypatch.setattr(eval_cli, "_open_model", open_model)
    monkeypatch.setattr(eval_cli, "_open_counter", lambda name, settings, model: counter)
    return {"AVIBE_HOME": str(tmp_path / "home"), "AVIBE_USER": "kofi"}


def test_E1_vibe_eval_writes_report_plots_and_raw_results_and_resumes(
    tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    args = ["eval", "-t", "queue", "-t", "spoofed_user", "-s", "truncate", "-s", "handoff", "--k", "1",
            "--window", "3000", "--out", str(out)]  # fmt: skip
    runner = CliRunner()
    first = runner.invoke(app, args, env=env)
    assert first.exit_code == 0, first.output
    assert (out / "report.md").is_file() and list(out.glob("*.png"))
    rows = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 4
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "`vibe eval -t queue" in report and "3,000 tokens" in report
    second = runner.invoke(app, [*args, "--no-probes", "--origin", "bash scripts/eval-mine.sh"], env=env)
    assert second.exit_code == 0, second.output
    assert len((out / "results.jsonl").read_text(encoding="utf-8").splitlines()) == 4  # nothing redone
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "`bash scripts/eval-mine.sh`" in report and "`vibe eval -t queue" not in report


def test_E1_vibe_eval_refuses_unknown_choices(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["eval", "-t", "nonsense"], env=env)
    assert result.exit_code == 2 and "unknown scenario type 'nonsense'" in result.output
    result = CliRunner().invoke(app, ["eval", "-s", "magic"], env=env)
    assert result.exit_code == 2 and "unknown strategy 'magic'" in result.output


def test_E1_vibe_eval_checkpoint_mode_is_checked_recorded_and_in_the_command(
    tmp_path: Path, env: dict[str, str]
) -> None:
    bad = CliRunner().invoke(app, ["eval", "--checkpoint-mode", "two"], env=env)
    assert bad.exit_code == 2 and "unknown --checkpoint-mode 'two'" in bad.output
    out = tmp_path / "out"
    args = ["eval", "-t", "queue", "-s", "handoff", "--k", "1", "--window", "3000", "--out", str(out),
            "--checkpoint-mode", "three", "--no-plots"]  # fmt: skip
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert row["checkpoint_mode"] == "three"
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "- **checkpoint mode**: three" in report and "--checkpoint-mode three`" in report


def test_E1_vibe_import_then_eval_replays_the_imported_session(tmp_path: Path, env: dict[str, str]) -> None:
    runner = CliRunner()
    imported = runner.invoke(app, ["import", str(FIXTURES / "claude_session.jsonl")], env=env)
    assert imported.exit_code == 0, imported.output
    session = imported.output.split()[1].rstrip(":")
    out = tmp_path / "out"
    args = [
        "eval",
        "--session",
        session,
        "-s",
        "truncate",
        "--window",
        "900",
        "--threshold",
        "0.9",
        "--out",
        str(out),
        "--no-plots",
    ]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "import-claude-" in (out / "results.jsonl").read_text(encoding="utf-8")


def test_E1_vibe_eval_scenarios_writes_loadable_files(tmp_path: Path) -> None:
    from avibe.evals.scenario import load_scenario

    result = CliRunner().invoke(
        app, ["eval-scenarios", str(tmp_path), "-t", "pitfalls", "--size", "3", "--yaml"]
    )
    assert result.exit_code == 0, result.output
    (path,) = tmp_path.glob("*.yaml")
    assert load_scenario(path).type == "pitfalls"


def test_E1_the_reproducing_command_line_keeps_every_choice() -> None:
    from avibe.cli.eval import _command_line

    line = _command_line(
        ["queue"], None, None, ["truncate"], "embedded", None, None, None, 4096, 0.5, Path("o"), False
    )
    assert line == (
        "vibe eval -t queue -s truncate --model embedded --seed 1 --k 1 --k 2 --k 4 --k 8 "
        "--window 4096 --threshold 0.5 --out o --no-probes"
    )


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _claude_line(text: str, minute: int) -> str:
    line = {
        "type": "user",
        "message": {"role": "user", "content": text},
        "timestamp": f"2026-11-20T09:{minute:02d}:00Z",
    }
    return json.dumps(line) + "\n"


def test_an_import_is_all_or_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    """A NUL byte in the second message: nothing of the first is recorded, on an empty home (no database
    file appears) or on an existing record (its file is byte-for-byte the same)."""
    bad = tmp_path / "nul.jsonl"
    bad.write_text(_claude_line("first message", 0) + _claude_line("a NUL \x00 here", 1), encoding="utf-8")
    db = Path(env["AVIBE_HOME"]) / "avibe.db"
    runner = CliRunner()
    refused = runner.invoke(app, ["import", str(bad)], env=env)
    assert refused.exit_code == 2 and refused.stderr.startswith("vibe: cannot import: text contains a NUL")
    assert "nothing was recorded" in refused.stderr and not db.exists()
    good = runner.invoke(app, ["import", str(FIXTURES / "claude_session.jsonl")], env=env)
    assert good.exit_code == 0, good.output
    before = _digest(db)
    again = runner.invoke(app, ["import", str(bad)], env=env)
    assert again.exit_code == 2 and _digest(db) == before
    sessions = json.loads(runner.invoke(app, ["sessions", "--json"], env=env).stdout)
    assert len(sessions) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"5", "expected a JSON object"),
        (b"\xff\xfe not utf-8", "not an importable session (UnicodeDecodeError"),
        (b"[" * 100_000, "nested too deeply"),
        (
            b'{"info": {"id": "s"}, "messages": [{"info": {"role": "user", "time": {"created": 1e20}}, '
            b'"parts": [{"type": "text", "text": "hi"}]}]}',
            "not an importable session",
        ),
    ],
)
def test_a_malformed_session_file_is_one_line_and_creates_no_database(
    tmp_path: Path, env: dict[str, str], content: bytes, message: str
) -> None:
    path = tmp_path / "session.json"
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["import", str(path)], env=env)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    assert not (Path(env["AVIBE_HOME"]) / "avibe.db").exists()


def test_a_relative_opencode_storage_path_imports(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = tmp_path / "storage"
    shutil.copytree(FIXTURES / "opencode_storage", storage)
    (session_file,) = (storage / "session").glob("*/*.json")
    monkeypatch.chdir(session_file.parent)
    result = CliRunner().invoke(app, ["import", session_file.name], env=env)
    assert result.exit_code == 0, result.output
    assert "(opencode)" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k", "0"], "--k 0 is out of range"),
        (["--k", "65"], "--k 65 is out of range"),
        (["--seed", "-1"], "--seed -1 is out of range"),
        (["--window", "10"], "--window 10 is out of range"),
        (["--threshold", "nan"], "--threshold nan is out of range"),
        (["--threshold", "1.5"], "--threshold 1.5 is out of range"),
        (["--jobs", "0"], "--jobs 0 is out of range"),
        (["--scenario", "{tmp}/nowhere.json"], "is not a file"),
        (["--scenario", "{tmp}/garbage.json"], "garbage.json: not valid JSON"),
        (["--session", "s-20261130-nosuch"], "no record yet"),
        (["--model", "nosuch-model"], "unknown model 'nosuch-model'"),
        (["--out", "{tmp}/garbage.json/out"], "is not a folder"),
    ],
)
def test_E1_vibe_eval_refuses_bad_arguments_before_opening_a_model(
    tmp_path: Path, env: dict[str, str], args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import avibe.cli.eval as eval_cli

    opened: list[str] = []
    monkeypatch.setattr(eval_cli, "_open_model", lambda name, settings: opened.append(name))
    (tmp_path / "garbage.json").write_text('{"scenario": [1, 2')
    filled = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = CliRunner().invoke(app, ["eval", "-t", "queue", "-s", "truncate", *filled], env=env)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("vibe: ")
    assert opened == [] and not (Path(env["AVIBE_HOME"]) / "avibe.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--size", "-1"], "--size -1 is out of range"), (["-t", "nope"], "unknown scenario type 'nope'")],
)
def test_E1_vibe_eval_scenarios_refuses_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["eval-scenarios", str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert not (tmp_path / "out").exists()
