"""The `recollection` setting: how Vibey is shown its checkpoint - "sections" (the
default), "rules-last" or "plain". It changes no content and no trust, so a project's config may set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.errors import ConfigError
from config_support import load_from

_load = load_from


def test_the_default_is_sections(tmp_path: Path) -> None:
    assert _load(tmp_path).recollection == "sections"


def test_the_environment_and_the_users_config_choose_it(tmp_path: Path) -> None:
    assert _load(tmp_path, env={"AVIBE_RECOLLECTION": "plain"}).recollection == "plain"
    assert _load(tmp_path, user='recollection = "rules-last"\n').recollection == "rules-last"
    both = _load(tmp_path, user='recollection = "rules-last"\n', env={"AVIBE_RECOLLECTION": "plain"})
    assert both.recollection == "plain"  # the environment first, as for every setting


def test_an_untrusted_project_may_choose_it_without_a_warning(tmp_path: Path) -> None:
    settings = _load(tmp_path, project='recollection = "plain"\n', user='recollection = "rules-last"\n')
    assert settings.recollection == "plain"
    assert settings.warnings == () and settings.announcements == ()


@pytest.mark.parametrize(
    ("project", "env", "where"),
    [
        ('recollection = "fancy"\n', {}, "config.toml: recollection='fancy'"),
        ("", {"AVIBE_RECOLLECTION": "Plain"}, "AVIBE_RECOLLECTION='Plain'"),
    ],
)
def test_a_bad_value_is_one_clear_error(
    tmp_path: Path, project: str, env: dict[str, str], where: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, project=project, env=env)
    assert where in str(err.value) and "use sections (the default), rules-last" in str(err.value)
