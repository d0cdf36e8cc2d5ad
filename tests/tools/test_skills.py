"""Agent Skills: discovery, the one-line catalogue, loading the full text at its current version (A1)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from avibe.tools import SkillLoad, catalogue_text, discover_skills, find_skill, skill_dirs


def _skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


GOOD = "---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo the thing step by step.\n"


def test_A1_discover_lists_skills_with_a_content_version(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _skill(root, "release", GOOD.format(name="release", description="Cut a release: tag,\n  changelog"))
    _skill(root, "triage", GOOD.format(name="triage", description="Triage the issue queue oldest first"))
    (root / "not-a-skill").mkdir()
    skills = discover_skills([root])
    assert [s.name for s in skills] == ["release", "triage"]
    assert skills[0].description == "Cut a release: tag, changelog"
    assert skills[0].path == root / "release" / "SKILL.md"
    assert len(skills[0].version) == 64
    before = skills[1].version
    (root / "triage" / "SKILL.md").write_text(GOOD.format(name="triage", description="changed"))
    assert find_skill([root], "triage").version != before  # type: ignore[union-attr]


def test_catalogue_has_one_line_per_skill_and_is_empty_without_skills(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _skill(root, "a", GOOD.format(name="alpha", description="x" * 500))
    _skill(root, "b", GOOD.format(name="beta", description="Short one"))
    lines = catalogue_text(discover_skills([root])).splitlines()
    assert lines[0].startswith("- alpha: xxx") and lines[0].endswith("...") and len(lines[0]) < 220
    assert lines[1] == "- beta: Short one"
    assert catalogue_text(discover_skills([tmp_path / "missing"])) == ""


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "does not start with a '---'"),
        ("---\nname: x\ndescription: y\n", "not closed"),
        ("---\nname: [unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a list\n---\n", "not a mapping"),
        ("---\ndescription: no name\n---\n", "'name' is missing"),
        ("---\nname: two words\ndescription: d\n---\n", "must be one word"),
        ("---\nname: n\ndescription: 42\n---\n", "'description' is missing or not a non-empty string"),
    ],
)
def test_malformed_skill_is_skipped_with_a_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, problem: str
) -> None:
    root = tmp_path / "skills"
    bad = _skill(root, "bad", text)
    _skill(root, "good", GOOD.format(name="good", description="fine"))
    with caplog.at_level(logging.WARNING, logger="avibe.tools.skills"):
        skills = discover_skills([root])
    assert [s.name for s in skills] == ["good"]
    assert any(str(bad) in r.getMessage() and problem in r.getMessage() for r in caplog.records), caplog.text


def test_earlier_dirs_win_a_name_clash(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    _skill(project, "deploy", GOOD.format(name="deploy", description="project version"))
    _skill(home, "deploy", GOOD.format(name="deploy", description="home version"))
    with caplog.at_level(logging.WARNING):
        skills = discover_skills([project, home])
    assert [(s.name, s.description) for s in skills] == [("deploy", "project version")]
    assert "shadowed" in caplog.text


def test_skill_load_returns_the_full_current_text_and_names_the_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = _skill(root, "triage", GOOD.format(name="triage", description="Queue work"))
    tool = SkillLoad([root])
    result = tool.run({"name": "triage"})
    assert not result.is_error and result.skill_loaded == "triage"
    assert "Do the thing step by step." in result.output and "description: Queue work" in result.output
    assert str(path.parent) in result.output
    path.write_text(GOOD.format(name="triage", description="Queue work") + "New rule: ask first.\n")
    assert "New rule: ask first." in tool.run({"name": "triage"}).output  # current version, not cached


def test_skill_load_unknown_name_lists_what_exists(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _skill(root, "triage", GOOD.format(name="triage", description="Queue work"))
    result = SkillLoad([root]).run({"name": "deploy"})
    assert result.is_error and result.skill_loaded is None
    assert "no skill named 'deploy'; available: triage" in result.output


def test_project_skills_come_before_the_users(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    _skill(work / ".avibe" / "skills", "s", GOOD.format(name="s", description="project"))
    _skill(home / "skills", "s", GOOD.format(name="s", description="user"))
    assert skill_dirs(work, home) == [work / ".avibe" / "skills", home / "skills"]
    assert [s.description for s in discover_skills(skill_dirs(work, home))] == ["project"]
