"""The approval mode and the person's rules as settings: AVIBE_APPROVAL or `approval`,
and the `[rules]` table of the project's `.avibe/config.toml` and the user's config.toml - deny rules of
every file add up, allow lists follow first-wins, every bad value is one ConfigError naming its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe import config
from avibe.config import load_settings
from avibe.errors import ConfigError
from avibe.tools import approval


def _project(tmp_path: Path, text: str) -> Path:
    project = tmp_path / "project"
    (project / ".avibe").mkdir(parents=True, exist_ok=True)
    (project / ".avibe" / "config.toml").write_text(text, encoding="utf-8")
    return project


def _load(
    tmp_path: Path, project: Path, env: dict[str, str] | None = None, user: str = ""
) -> config.Settings:
    user_file = tmp_path / "user.toml"
    user_file.write_text(user, encoding="utf-8")
    return load_settings(
        {"AVIBE_HOME": str(tmp_path / "home"), **(env or {})}, project_dir=project, user_config=user_file
    )


def test_the_edge_and_the_tools_know_the_same_modes_and_rules() -> None:
    assert config.APPROVAL_MODES == approval.APPROVAL_MODES
    assert config.RULE_KEYS == approval.RULE_KEYS


def test_defaults_are_auto_with_no_rules(tmp_path: Path) -> None:
    settings = _load(tmp_path, tmp_path / "nowhere")
    assert settings.approval == "auto"
    assert (settings.deny, settings.allow_commands, settings.allow_writes) == ((), (), ())


def test_the_project_sets_the_mode_and_rules(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        'approval = "ask"\n[rules]\ndeny = ["vendor/**"]\nallow_commands = ["git status", "pytest*"]\n',
    )
    settings = _load(tmp_path, project)
    assert settings.approval == "ask" and settings.deny == ("vendor/**",)
    assert settings.allow_commands == ("git status", "pytest*") and settings.allow_writes == ()
    assert _load(tmp_path, project, {"AVIBE_APPROVAL": "auto"}).approval == "auto"  # the environment wins


def test_deny_rules_add_up_and_allow_lists_are_first_wins(tmp_path: Path) -> None:
    project = _project(tmp_path, '[rules]\ndeny = ["vendor/**"]\nallow_commands = ["pytest*"]\n')
    user = (
        '[rules]\ndeny = ["**/.env", "vendor/**"]\nallow_commands = ["make*"]\nallow_writes = ["docs/**"]\n'
    )
    settings = _load(tmp_path, project, user=user)
    assert settings.deny == ("vendor/**", "**/.env")
    assert settings.allow_commands == ("pytest*",)  # the project's list replaces the user's
    assert settings.allow_writes == ("docs/**",)  # the user's, where the project has none


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("", {"AVIBE_APPROVAL": "sometimes"}, "AVIBE_APPROVAL='sometimes' is not an approval mode"),
        ('approval = "never"\n', {}, "config.toml: approval='never' is not an approval mode"),
        ('[rules]\nforbid = ["x"]\n', {}, "unknown rule 'forbid' in [rules]"),
        ('[rules]\ndeny = "vendor/**"\n', {}, "rules.deny must be a list of strings"),
        ("[rules]\ndeny = [1]\n", {}, "rules.deny must be a list of strings"),
        ('[rules]\ndeny = [""]\n', {}, "holds an empty pattern"),
        ('[rules]\ndeny = ["../outside"]\n', {}, "[rules]: path rule '../outside'"),
        ('[rules]\ndeny = ["x[ab"]\n', {}, "without a closing"),
        ('[rules]\nallow_commands = ["ok\\u001b[2J"]\n', {}, "control or unencodable characters"),
        ("rules = 3\n", {}, "rules"),
    ],
)
def test_bad_modes_and_rules_are_one_clear_error(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    project = _project(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, project, env)
    assert message in str(error.value), str(error.value)
