"""The `compaction` setting (F1): how Vibey makes room - "checkpoint" (the default) or any name of the
compaction registry. Every compactor keeps the record whole, so a project's config may pick it."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.agent.compaction import compaction_names
from avibe.config import Settings, load_settings
from avibe.errors import ConfigError


def _load(tmp_path: Path, project: str = "", user: str = "", env: dict[str, str] | None = None) -> Settings:
    folder = tmp_path / "project"
    (folder / ".avibe").mkdir(parents=True, exist_ok=True)
    (folder / ".avibe" / "config.toml").write_text(project, encoding="utf-8")
    user_file = tmp_path / "user.toml"
    user_file.write_text(user, encoding="utf-8")
    return load_settings(env or {}, project_dir=folder, user_config=user_file)


def test_F1_the_default_is_the_checkpoint(tmp_path: Path) -> None:
    assert _load(tmp_path).compaction == "checkpoint"


@pytest.mark.parametrize("name", compaction_names())
def test_F1_the_environment_the_users_and_the_projects_config_pick_any_registered_name(
    tmp_path: Path, name: str
) -> None:
    assert _load(tmp_path, env={"AVIBE_COMPACTION": name}).compaction == name
    assert _load(tmp_path, user=f'compaction = "{name}"\n').compaction == name
    assert _load(tmp_path / "p", project=f'compaction = "{name}"\n').compaction == name


def test_F1_an_unknown_compaction_is_one_clear_error_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"AVIBE_COMPACTION='summarise' is not a compaction; use checkpoint"
    ):
        _load(tmp_path, env={"AVIBE_COMPACTION": "summarise"})
    with pytest.raises(ConfigError, match="handoff"):
        _load(tmp_path, user='compaction = "summarise"\n')
