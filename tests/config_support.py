"""Settings loaded from given files: a project's `.avibe/config.toml`, the user's config.toml and an
environment, nothing else read (for the tests of one setting at a time)."""

from __future__ import annotations

from pathlib import Path

from avibe.config import Settings, load_settings


def load_from(
    tmp_path: Path, project: str = "", user: str = "", env: dict[str, str] | None = None
) -> Settings:
    folder = tmp_path / "project"
    (folder / ".avibe").mkdir(parents=True, exist_ok=True)
    (folder / ".avibe" / "config.toml").write_text(project, encoding="utf-8")
    user_file = tmp_path / "user.toml"
    user_file.write_text(user, encoding="utf-8")
    return load_settings(env or {}, project_dir=folder, user_config=user_file)
