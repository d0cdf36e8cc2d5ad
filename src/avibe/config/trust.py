"""The layered sources and the trust rule: the environment and the user's config are the user's own; the
project's `.avibe/config.toml` lives in the workdir, which the agent can write, so without trust it may
only tighten. What it tried to loosen is named in `Sources.warnings`; what it tightened at earlier starts
stays in force (`Sources.held`, avibe.tightening)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from avibe.config.layers import PROJECT_CONFIG, Layer, checked_layer, user_config_file
from avibe.config.values import parse_rule_list, parse_text
from avibe.errors import ConfigError
from avibe.tightening import HELD_KEYS, Remembered, Tightening, asked, hold, pending, project_state, recall

TRUST_KEY: Final = "trusted_projects"
# a project config may set these only when the user trusts the project.
TRUSTED_ONLY: Final = ("home", "database_url", "model", "user", "model_cache", "serve_url")
RULE_KEYS: Final = ("deny", "allow_commands", "allow_writes")


def _project_dir(project_dir: Path | None) -> Path | None:
    if project_dir is not None:
        return project_dir
    try:
        return Path.cwd()
    except OSError:  # the current directory was removed
        return None


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare as written
        return path.expanduser().absolute()


def trusted_folders(user: Layer) -> list[Path]:
    """The user's `trusted_projects`: absolute folders, each resolved (symlinks followed)."""
    listed = user.values.get(TRUST_KEY) or []
    where = user.where(TRUST_KEY)
    folders = []
    for item in listed:
        text = (parse_text(item, where) or "").strip()
        if not text or not Path(text).expanduser().is_absolute():
            raise ConfigError(
                f"{where} holds {item!r}, which is not an absolute folder path; list each trusted "
                'project by its full path, e.g. trusted_projects = ["/home/me/code/app"]'
            )
        folders.append(_resolved(Path(text)))
    return folders


def _shown(value: object) -> str:
    """A value the agent may have written, for a warning line: TOML-like, ASCII-escaped, short."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class Sources:
    """The environment, the project's config and the user's, and whether the user trusts the project.
    The environment and the user's config are the user's own; the project's config lives in the workdir,
    which the agent can write, so without trust it may only tighten."""

    env: Layer
    project: Layer
    user: Layer
    folder: Path | None  # the project folder, resolved
    trusted: bool
    warnings: list[str]
    origins: dict[str, str]  # key -> where the value in force came from (announcements)
    project_error: str | None = None  # the project's file could not be read: why (see `held`)

    @classmethod
    def read(cls, environ: Mapping[str, str], project_dir: Path | None, user_config: Path | None) -> Sources:
        folder = _project_dir(project_dir)
        user = checked_layer({}, user_config_file() if user_config is None else user_config)
        resolved = None if folder is None else _resolved(folder)
        trusted = resolved is not None and resolved in trusted_folders(user)
        project, broken = Layer(Path(PROJECT_CONFIG), {}), None  # the current directory is gone: no project
        if folder is not None:
            try:
                project = checked_layer({}, folder / PROJECT_CONFIG)
            except ConfigError as exc:  # fatal unless a record of its tightening stands in (`held`)
                if trusted:
                    raise
                project, broken = Layer(folder / PROJECT_CONFIG, {}), str(exc)
        env = checked_layer(environ, None)
        sources = cls(env, project, user, resolved, trusted, [], {}, broken)
        if TRUST_KEY in project.values:
            sources.warnings.append(
                f"ignoring {TRUST_KEY} in {project.path}: only your own config ({user.path}) can trust "
                "a project"
            )
        return sources

    def _own_layers(self) -> tuple[Layer, ...]:
        """The layers whose values apply as they are, first wins."""
        return (self.env, self.project, self.user) if self.trusted else (self.env, self.user)

    def mine(self, key: str) -> tuple[Any, str]:
        """The value the user's own sources give `key` (None: the default) and where, for errors."""
        for layer in self._own_layers():
            if key in layer.values:
                self.origins[key] = layer.origin(key)
                return layer.values[key], layer.where(key)
        return None, f"AVIBE_{key.upper()}"

    def _offered(self, key: str) -> bool:
        """The project sets `key`, and only a trust check stands between its value and the settings."""
        return not self.trusted and key in self.project.values and key not in self.env.values

    def ignore(self, key: str, value: object) -> None:
        folder = self.folder if self.folder is not None else "the project folder"
        self.warnings.append(
            f"ignoring {key} = {_shown(value)} in {self.project.path}: a project's config may only make "
            f'settings stricter; to use it, add "{folder}" to {TRUST_KEY} in {self.user.path}'
        )

    def raw(self, key: str) -> tuple[Any, str]:
        """A setting only the user sets (TRUSTED_ONLY): a project's other value is ignored and named."""
        value, where = self.mine(key)
        if self._offered(key) and self.project.values[key] != value:
            self.ignore(key, self.project.values[key])
        return value, where

    def tightened(
        self, key: str, parse: Callable[[Any, str], Any], stricter: Callable[[Any, Any], bool]
    ) -> Any:
        """A setting the project may tighten: `parse(raw, where)` checks a value, `stricter(new, old)`
        says whether the project's parsed value is at least as strict as the user's."""
        value = parse(*self.mine(key))
        if not self._offered(key):
            return value
        offered = parse(self.project.values[key], self.project.where(key))
        if stricter(offered, value):
            self.origins[key] = self.project.origin(key)
            return offered
        self.ignore(key, self.project.values[key])
        return value

    def rules(self, approval: str) -> dict[str, tuple[str, ...]]:
        """The `[rules]` tables: deny rules of every source add up (a rule only ever refuses more); an
        allow list is first-wins among the user's sources, and the project's applies without trust only
        when it narrows: the user's mode is auto (everything runs unasked) or it lies inside the user's."""
        tables = {id(layer): _rule_table(layer) for layer in (self.env, self.project, self.user)}
        deny: list[str] = []
        for layer in (self.env, self.project, self.user):
            deny.extend(rule for rule in tables[id(layer)].get("deny", ()) if rule not in deny)
        found: dict[str, tuple[str, ...]] = {"deny": tuple(deny)}
        for key in ("allow_commands", "allow_writes"):
            mine = next((layer for layer in self._own_layers() if key in tables[id(layer)]), None)
            found[key] = () if mine is None else tables[id(mine)][key]
            if mine is not None:
                self.origins[key] = mine.origin("rules")
            offered = tables[id(self.project)].get(key)
            if offered is None or self.trusted or key in tables[id(self.env)]:
                continue
            if approval == "auto" or set(offered) <= set(found[key]):
                found[key], self.origins[key] = offered, self.project.origin("rules")
            elif offered != found[key]:
                self.ignore(f"rules.{key}", list(offered))
        if any(found.values()):
            from avibe.tools.approval import Rules  # patterns checked here, named with their setting

            try:
                Rules(**found)
            except ValueError as exc:
                raise ConfigError(f"[rules]: {exc}") from None
        return found

    def held(self, home: Path, in_force: Tightening) -> tuple[Tightening, Remembered | None]:
        """The settings in force held to what the project's config tightened at earlier starts (the
        record in Avibe's home, avibe.tightening), and the record this start leaves. A project file that
        cannot be read is fatal, as ever, unless such a record stands in for it."""
        if self.trusted or self.folder is None:
            return in_force, None
        record = recall(home, self.folder)
        if self.project_error is not None and record is None:
            raise ConfigError(self.project_error)
        config, env_rules = self.project.path or Path(PROJECT_CONFIG), _rule_table(self.env)
        skip = frozenset(key for key in HELD_KEYS if key in self.env.values or key in env_rules)
        held, line = hold(record, in_force, skip, project_state(config, self.project_error), config)
        self.warnings.extend(() if line is None else (line,))
        here = {key for key, origin in self.origins.items() if origin == str(config)}
        now = asked(in_force, here, _rule_table(self.project).get("deny", ()))
        return held, pending(record, now, self.folder)


def _rule_table(layer: Layer) -> dict[str, tuple[str, ...]]:
    """One source's `[rules]` table, checked: a table of known rules, each a list of patterns."""
    if "rules" not in layer.values:
        return {}
    table = layer.values["rules"]
    origin = layer.origin("rules")
    if not isinstance(table, dict):
        raise ConfigError(f'{origin}: rules must be a table, e.g. [rules] deny = ["vendor/**"]')
    unknown = sorted(set(table) - set(RULE_KEYS))
    if unknown:
        raise ConfigError(
            f"{origin}: unknown rule {unknown[0]!r} in [rules] (the rules are {', '.join(RULE_KEYS)})"
        )
    return {key: parse_rule_list(table[key], f"{origin}: rules.{key}") for key in RULE_KEYS if key in table}
