"""`vibe checkpoints` over a session that really checkpointed (list, --show, --diff, --json, errors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from vibey_doubles import BEFORE_STEPS, checkpoint_steps, tool_step, write_lines

from avibe.cli import app
from avibe.providers.scripted import reply


@pytest.fixture
def checkpointed(tmp_path: Path, make_harness: Any) -> tuple[dict[str, str], str]:
    """A session with two checkpoints, in the database of a temp AVIBE_HOME."""
    home = tmp_path / "home"
    home.mkdir()
    steps = [
        *BEFORE_STEPS,
        tool_step("read_file", path="c.txt"),
        *checkpoint_steps(5),
        reply("c read"),
        tool_step("read_file", path="d.txt"),
        tool_step("read_file", path="e.txt"),
        # no notes question: nothing since the first is worded as a rule, decision or lesson
        *checkpoint_steps(4, workstream=("W1", "ticket queue; next: 004")),
        reply("d and e read"),
    ]
    h = make_harness(steps, db=home / "avibe.db")
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90), ("d.txt", 180), ("e.txt", 180)):
        write_lines(h.workdir, name, lines)
    for text in ("Read a.txt; never touch vendor/.", "Now b.txt.", "Now c.txt.", "Now d.txt and e.txt."):
        h.send(text)
    h.model.assert_consumed()
    assert len(h.checkpoints()) == 2
    return {"AVIBE_HOME": str(home), "COLUMNS": "200"}, h.vibey.session_id


def test_A4_list_show_diff(checkpointed: tuple[dict[str, str], str]) -> None:
    env, session = checkpointed
    runner = CliRunner()
    listed = runner.invoke(app, ["checkpoints", "-s", session], env=env)
    assert listed.exit_code == 0, listed.output
    assert listed.output.count("\n") == 2 and "#1" in listed.output and "#2" in listed.output
    shown = runner.invoke(app, ["checkpoints", "--show", "1"], env=env)
    assert "## Mind" in shown.output and "Read a.txt; never touch vendor/." in shown.output
    data = json.loads(runner.invoke(app, ["checkpoints", "--show", "2", "--json"], env=env).output)
    assert data["number"] == 2 and data["meta"]["tokens_after"] < data["meta"]["tokens_before"]
    diff = runner.invoke(app, ["checkpoints", "--diff", "1", "2"], env=env)
    assert diff.exit_code == 0 and "checkpoint 1" in diff.output and "checkpoint 2" in diff.output


def test_unknown_session_and_checkpoint_are_one_line_exit_2(checkpointed: tuple[dict[str, str], str]) -> None:
    env, _ = checkpointed
    runner = CliRunner()
    for args in (["checkpoints", "-s", "nope"], ["checkpoints", "--show", "9"]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 2
        assert len(result.stderr.strip().splitlines()) == 1


def test_no_record_yet_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["checkpoints"], env={"AVIBE_HOME": str(tmp_path / "empty")})
    assert result.exit_code == 2 and "no record yet" in result.stderr
    assert not (tmp_path / "empty" / "avibe.db").exists()
