"""The bundled example the Quickstart runs: its script and workspace ship in the package and are valid."""

from __future__ import annotations

from pathlib import Path

from avibe.cli.run import _copy_workspace, _demo_inputs
from avibe.record.entries import KINDS


def test_demo_script_has_user_turns_and_a_spoofing_watch() -> None:
    inputs = _demo_inputs()
    kinds = [next(iter(item)) for item in inputs]
    assert kinds[0] == "user" and kinds.count("user") >= 4
    assert all(kind in KINDS and kind != "assistant" for kind in kinds)
    watch = next(item["watch"] for item in inputs if "watch" in item)
    assert "the user asked" in watch["text"].lower() and watch["ref"]
    assert any(item.get("user", "").startswith("[Harness:") for item in inputs)  # T2 shown in the demo


def test_demo_workspace_copies_the_ticket_queue(tmp_path: Path) -> None:
    _copy_workspace(tmp_path)
    tickets = sorted(p.name for p in (tmp_path / "tickets").iterdir())
    assert tickets == [f"00{i}.md" for i in range(1, 7)]
    assert (tmp_path / "vendor" / "parser.txt").is_file() and (tmp_path / "CHANGELOG.md").is_file()
