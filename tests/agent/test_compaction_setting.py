"""The `compaction` setting (F1): how Vibey makes room - "checkpoint" (the default) or any name of the
compaction registry. Every compactor keeps the record whole, so a project's config may pick it."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.agent.compaction import compaction_names
from avibe.errors import ConfigError
from config_support import load_from

_load = load_from


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
