"""`vibe eval` and `vibe import` through the real CLI, with the model seam set to the strict scripted model
(the embedded model is exercised by the `embedded`-marked smoke test, not here)."""

from __future__ import annotations

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
