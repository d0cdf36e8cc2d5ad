"""One source's raw values, read and typed with pydantic-settings: the environment (AVIBE_*), the user's
`config.toml`, or the project's `.avibe/config.toml` - the last read the one safe way the harness reads
the workdir (no link followed, a bounded regular file). Whether a value applies is avibe.config.trust's
business; what it means, avibe.config.values'."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from avibe.errors import ConfigError

PROJECT_CONFIG: Final = Path(".avibe") / "config.toml"
PROJECT_CONFIG_MAX_BYTES: Final = 1024 * 1024  # a settings file; more is refused with one line
MAX_DEPTH: Final = 8  # tables and lists within each other: [mcp.servers.NAME] args = [...] needs 4


def user_config_file() -> Path:
    """`config.toml` in the platform's user config dir (`~/.config/avibe/config.toml` on Linux)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("avibe", appauthor=False)) / "config.toml"


class _Layers(BaseSettings):
    """The raw values of every source, merged (first source wins); load_settings checks them."""

    model_config = SettingsConfigDict(env_prefix="AVIBE_", extra="forbid", env_ignore_empty=True)

    home: str | None = None
    database_url: str | None = None
    model: str | None = None
    user: str | None = None
    model_cache: str | None = None
    model_window: int | str | None = None
    sandbox: str | None = None
    approval: str | None = None
    rules: dict[str, Any] | None = None
    serve_url: str | None = None
    recollection: str | None = None
    compaction: str | None = None
    network: str | None = None
    host_sockets: str | None = None
    trusted_projects: list[str] | None = None  # read from the user's config only
    mcp: dict[str, Any] | None = None  # [mcp.servers.NAME] (avibe.config.mcp), from the files only


class _MappingEnv(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (load_settings(env) reads only `env`)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {
            key: value
            for key, value in environ.items()
            # trust: the user's file only; MCP servers: the config files only (avibe.config.mcp)
            if key.startswith("AVIBE_") and key not in ("AVIBE_TRUSTED_PROJECTS", "AVIBE_MCP")
        }
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._environ.items() if value != ""}


def _layers_class(environ: Mapping[str, str], files: tuple[Path, ...]) -> type[_Layers]:
    """`_Layers` over an environment and the TOML files, the environment first."""
    return _layered(
        lambda cls: (
            _MappingEnv(cls, environ),
            *(TomlConfigSettingsSource(cls, toml_file=path) for path in files),
        )
    )


def _layered(
    sources: Callable[[type[BaseSettings]], tuple[PydanticBaseSettingsSource, ...]],
) -> type[_Layers]:
    """`_Layers` whose only sources are those `sources` makes (pydantic-settings asks per class)."""

    class Layered(_Layers):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return sources(settings_cls)

    return Layered


def _read_toml(path: Path) -> dict[str, Any]:
    """The user's own config file (theirs: read as it is, a link to their dotfiles followed)."""
    try:
        with path.open("rb") as handle:
            return _parsed(path, handle.read().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix or remove it") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror}); fix its permissions or remove it") from None


def _parsed(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix or remove it") from None
    except RecursionError:  # tables nested thousands deep: one line, never a traceback
        raise ConfigError(f"{path} is not valid TOML (nested too deep); fix or remove it") from None


def _given_class(values: dict[str, Any]) -> type[_Layers]:
    """`_Layers` over values already read (the TOML source pydantic-settings uses is this same source)."""
    return _layered(lambda cls: (InitSettingsSource(cls, init_kwargs=values),))


def _read_project_toml(path: Path) -> dict[str, Any] | None:
    """The project's `.avibe/config.toml` - in the workdir, where the agent writes - read the one way the
    harness reads such places (avibe/sources/agent_files.py): from the project folder down, no link
    followed, a regular UTF-8 file of bounded size. None when there is none; ConfigError (one line, none
    of a link's target) when there is one that cannot be read so."""
    from avibe.sources.agent_files import read_agent_file

    found = read_agent_file(path.parent.parent, PROJECT_CONFIG, max_bytes=PROJECT_CONFIG_MAX_BYTES)
    if found.status == "missing":
        return None
    if not found.ok:
        raise ConfigError(f"{found.line()}; make it a regular file in the project, or remove it")
    return _parsed(path, found.text)


@dataclass(frozen=True, slots=True)
class Layer:
    """One source's values (the keys it sets, typed by _Layers); `path` is None for the environment."""

    path: Path | None
    values: dict[str, Any]

    def where(self, key: str) -> str:
        """The place of a key, for errors: the variable, or the file and the key."""
        return f"AVIBE_{key.upper()}" if self.path is None else f"{self.path}: {key}"

    def origin(self, key: str) -> str:
        """The place of a key, for announcements: the variable, or the file."""
        return f"AVIBE_{key.upper()}" if self.path is None else str(self.path)


def _validation_problems(exc: ValidationError, layer: Layer) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            known = ", ".join(_Layers.model_fields)
            problems.append(f"unknown setting {key!r} in {layer.path} (the keys are {known})")
        else:
            problems.append(f"{layer.where(key)}: {error['msg']}")
    return "; ".join(problems)


def _read_layer(environ: Mapping[str, str], path: Path | None) -> Layer:
    """The values one source sets: the environment (`path` None) or one config file (absent: none). A
    project's `.avibe/config.toml` is read once, safely (`_read_project_toml`), and those very values are
    checked - never the file again by path."""
    layer = Layer(path, {})
    if path is not None and path.parts[-2:] == PROJECT_CONFIG.parts:
        values = _read_project_toml(path)
        if values is None:
            return layer
        try:
            checked = _given_class(values)()
        except ValidationError as exc:
            raise ConfigError(_validation_problems(exc, layer)) from None
        return Layer(path, {key: getattr(checked, key) for key in checked.model_fields_set})
    if path is not None:
        if not path.is_file():
            return layer
        _read_toml(path)  # a broken file is named as such
    try:
        raw = _layers_class(environ if path is None else {}, () if path is None else (path,))()
    except ValidationError as exc:
        raise ConfigError(_validation_problems(exc, layer)) from None
    return Layer(path, {key: getattr(raw, key) for key in raw.model_fields_set})


def _nested_too_deep(value: object) -> bool:
    """Whether `value` nests tables and lists deeper than MAX_DEPTH (checked without recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def checked_layer(environ: Mapping[str, str], path: Path | None) -> Layer:
    """_read_layer with the nesting bounded: a file nested thousands deep (the agent may write the
    project's) is one ConfigError, never a RecursionError from the TOML or JSON reader."""
    where = "AVIBE_RULES" if path is None else str(path)
    too_deep = ConfigError(f"{where} nests tables or lists more than {MAX_DEPTH} deep; fix or remove it")
    try:
        layer = _read_layer(environ, path)
    except RecursionError:
        raise too_deep from None
    if _nested_too_deep(layer.values):
        raise too_deep
    return layer
