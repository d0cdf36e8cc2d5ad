"""The README stays true: its Quickstart scripts exist, and every command and option its CLI table names
is one `vibe` really has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avibe.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _quickstart() -> list[str]:
    block = README.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]


def _cli_rows() -> list[str]:
    table = README.split("## The CLI", 1)[1].split("\n\n", 2)[1]
    return [row.split("|")[1] for row in table.splitlines()[2:]]


def test_quickstart_has_exactly_two_commands_and_their_scripts_exist() -> None:
    commands = _quickstart()
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    for command in commands:
        assert (ROOT / command.split()[1]).is_file()


def test_ci_runs_the_readmes_test_command() -> None:
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def _usages() -> list[tuple[list[str], list[str]]]:
    found = []
    for row in _cli_rows():
        for usage in re.findall(r"`(vibe [^`]+)`", row):
            words = usage.split()[1:]
            command = [w for w in words if re.fullmatch(r"[a-z][a-z-]*", w)][:2]
            options = re.findall(r"(--[a-z][a-z-]*)", usage)
            found.append((command, options))
    return found


@pytest.mark.parametrize(("command", "options"), _usages())
def test_every_readme_command_and_option_exists(command: list[str], options: list[str]) -> None:
    runner = CliRunner()
    groups = {"skill", "watch", "timer", "callback"}  # the command groups: `vibe watch add --help`
    path = command if command[0] in groups else command[:1]
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    for option in options:
        assert option in result.output, f"`vibe {' '.join(path)}` has no {option}"


def test_every_script_the_readme_names_exists_and_parses() -> None:
    import subprocess

    scripts = sorted(set(re.findall(r"bash (scripts/[\w.-]+\.sh)", README)))
    assert "scripts/eval-sweep.sh" in scripts  # the command behind the memory evaluation's tables
    for script in scripts:
        assert (ROOT / script).is_file(), script
        checked = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
