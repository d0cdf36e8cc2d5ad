"""Settings: one object, read once at the edge (STYLE 9). Every field is documented in the README.

Sources, first wins: the environment (AVIBE_*), the project's `.avibe/config.toml` (in the current
directory), the user's `config.toml` in the platform's user config dir (`~/.config/avibe/config.toml`),
then the defaults. The files use the field names below as keys (`user` for AVIBE_USER), e.g.
`model = "anthropic/claude-sonnet-4-5"`. Read with pydantic-settings; every bad value is a ConfigError
that names the variable or the file and says what to set.

| field         | environment              | default                                            |
|---------------|--------------------------|----------------------------------------------------|
| home          | AVIBE_HOME               | the platform's user data dir (platformdirs)        |
| database_url  | AVIBE_DATABASE_URL       | sqlite:///<home>/avibe.db (WAL)                    |
| model         | AVIBE_MODEL              | embedded (Qwen2.5-Coder-0.5B-Instruct on llama.cpp) |
| user_name     | AVIBE_USER               | the login name                                     |
| model_cache   | AVIBE_MODEL_CACHE        | the platform's user cache dir /models (shared by    |
|               |                          | every AVIBE_HOME, so tests with a temp home reuse it)|
| model_window  | AVIBE_MODEL_WINDOW       | none: the window from the model map; set it for a   |
|               |                          | model the map lacks (an Ollama/vLLM server) or to   |
|               |                          | use less than the full window                       |
| sandbox       | AVIBE_SANDBOX            | workspace-write; read-only, full-access (opt-in:    |
|               |                          | no sandbox); see avibe/tools/sandbox.py             |
| approval      | AVIBE_APPROVAL           | auto; ask: shell commands and writes no allow rule  |
|               |                          | covers wait for the person (avibe/tools/approval.py)|
| deny, allow_commands, allow_writes | the `[rules]` table of a config.toml | none (issue 11 item 9) |

`[rules]` (e.g. `deny = ["vendor/**"]`): the file tools never change a path a deny rule matches; the
deny rules of every file add up (a rule only ever refuses more), while `allow_commands` and
`allow_writes` follow first-wins like every other setting.
"""

from __future__ import annotations

import getpass
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from avibe.errors import ConfigError

DEFAULT_MODEL = "embedded"
MIN_WINDOW: Final = 256  # below this no system prompt, let alone a checkpoint, fits
MAX_WINDOW: Final = 2**31 - 1  # llama.cpp's n_ctx is a C int; no model has more
PROJECT_CONFIG: Final = Path(".avibe") / "config.toml"
SANDBOX_MODES: Final = ("read-only", "workspace-write", "full-access")
APPROVAL_MODES: Final = ("auto", "ask")  # avibe.tools.approval.APPROVAL_MODES (a test keeps them equal)
RULE_KEYS: Final = ("deny", "allow_commands", "allow_writes")


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    database_url: str
    model: str
    user_name: str
    model_cache: Path
    model_window: int | None = None
    sandbox: str = "workspace-write"  # the shell tool's sandbox mode (avibe.tools.sandbox.MODES)
    approval: Literal["auto", "ask"] = "auto"  # issue 11 item 9 (avibe.tools.approval)
    deny: tuple[str, ...] = ()  # path rules the file tools never write under
    allow_commands: tuple[str, ...] = ()  # shell commands run without asking in ask mode
    allow_writes: tuple[str, ...] = ()  # paths written without asking in ask mode
    serve_url: str = "http://127.0.0.1:8765"  # where `vibe serve` listens; callback URLs start here

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def sessions_dir(self) -> Path:
        """Per-session temporary directories (checkpoint files, F2) and live state live below this."""
        return self.home / "sessions"


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


class _MappingEnv(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (load_settings(env) reads only `env`)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {key: value for key, value in environ.items() if key.startswith("AVIBE_")}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._environ.items() if value != ""}


def _layers_class(environ: Mapping[str, str], files: tuple[Path, ...]) -> type[_Layers]:
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
            tomls = tuple(TomlConfigSettingsSource(settings_cls, toml_file=path) for path in files)
            return (_MappingEnv(settings_cls, environ), *tomls)

    return Layered


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "user"


def _default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("avibe", appauthor=False))


def _default_cache() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("avibe", appauthor=False)) / "models"


def masked_url(url: str) -> str:
    """`url` for messages and logs: the password replaced by `***` (SQLAlchemy's own rendering); a URL
    that does not parse has whatever stands where a password would be masked. Never raises."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return re.sub(r"(://[^:/@]*:).*@", r"\1***@", url)


class _Where:
    """Names the place a value came from, for messages: the variable, or the key and its file."""

    def __init__(self, environ: Mapping[str, str], files: tuple[Path, ...]) -> None:
        self._environ = environ
        self._files: list[tuple[Path, dict[str, Any]]] = []
        for path in files:
            if path.is_file():
                self._files.append((path, _read_toml(path)))

    def files(self) -> list[tuple[Path, dict[str, Any]]]:
        return list(self._files)

    def in_env(self, key: str) -> bool:
        return bool(self._environ.get(f"AVIBE_{key.upper()}"))

    def file_of(self, key: str) -> str:
        return next((str(path) for path, data in self._files if key in data), "a config file")

    def __call__(self, key: str) -> str:
        var = f"AVIBE_{key.upper()}"
        if self._environ.get(var):
            return var
        for path, data in self._files:
            if key in data:
                return f"{path}: {key}"
        return var


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix or remove it") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({exc.strerror}); fix its permissions or remove it") from None


def _config_files(project_dir: Path | None, user_config: Path | None) -> tuple[Path, ...]:
    if project_dir is None:
        try:
            project_dir = Path.cwd()
        except OSError:  # the current directory was removed
            project_dir = None
    files = [] if project_dir is None else [project_dir / PROJECT_CONFIG]
    files.append(user_config_file() if user_config is None else user_config)
    return tuple(files)


def _raw_layers(environ: Mapping[str, str], files: tuple[Path, ...]) -> _Layers:
    where = _Where(environ, files)  # also reads every file once, so a broken one is named
    try:
        return _layers_class(environ, files)()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":
                known = ", ".join(_Layers.model_fields)
                problems.append(f"unknown setting {key!r} in {where.file_of(key)} (the keys are {known})")
            else:
                problems.append(f"{where(key)}: {error['msg']}")
        raise ConfigError("; ".join(problems)) from None


def _text(value: str | None, where: str) -> str | None:
    """A setting's text: None when unset; refused when it holds controls or cannot be encoded."""
    if value is None:
        return None
    if not value.isprintable():
        raise ConfigError(f"{where}={value!r} contains control or unencodable characters; set plain text")
    return value


def _folder(value: str | None, where: str, default: Path) -> Path:
    """A folder setting: it, or the nearest folder above it that exists, must be a folder."""
    text = _text(value, where)
    if text is not None and not text.strip():
        raise ConfigError(f"{where} is blank; set a folder path or unset it")
    path = default if text is None else Path(text).expanduser()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is" if probe == path else f"would be inside {probe}, which is"
        raise ConfigError(f"{where}={str(path)!r} {what} not a folder; point it at a folder")
    return path


def _database_url(value: str | None, where: str, home: Path) -> str:
    if value is None:
        return f"sqlite:///{home / 'avibe.db'}"
    from avibe.store.open import is_in_memory

    text = _text(value, where) or ""
    hint = "use sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DB"
    if not text.startswith(("sqlite:", "postgresql")):
        raise ConfigError(f"{where}={masked_url(text)!r} is not supported; {hint}")
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(f"{where}={masked_url(text)!r} is not a database URL ({exc}); {hint}") from None
    if is_in_memory(text):
        raise ConfigError(
            f"{where}={text!r} is an in-memory database: the record would vanish when vibe exits; {hint}"
        )
    database = parsed.database or ""
    if parsed.get_backend_name() == "sqlite" and not database.startswith("file:"):
        path = Path(database).expanduser()
        if path.exists() and not path.is_file():
            raise ConfigError(f"{where}={text!r}: {path} is not a file; point it at a database file")
        probe = path.parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise ConfigError(f"{where}={text!r}: the database would be inside {probe}, not a folder")
    return text


def _window(value: int | str | None, where: str) -> int | None:
    if value is None:
        return None
    raw = str(value).strip()
    if not re.fullmatch(r"[0-9]{1,12}", raw):
        example = f"{where}=32768" if where.startswith("AVIBE_") else "model_window = 32768"
        raise ConfigError(f"{where}={value!r} is not a whole number of tokens; e.g. {example}")
    window = int(raw)
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise ConfigError(
            f"{where}={window} is out of range; a window is {MIN_WINDOW} to {MAX_WINDOW:,} tokens"
        )
    return window


def _sandbox_mode(value: str | None, where: str) -> str:
    # The modes of avibe.tools.sandbox.MODES, spelled out: the edge does not import the tools (a test
    # in tests/tools/test_sandbox.py keeps the two lists equal).
    mode = (value or "workspace-write").strip()
    if mode not in SANDBOX_MODES:
        raise ConfigError(
            f"{where}={mode!r} is not a sandbox mode; use workspace-write (the default), read-only, "
            "or full-access (commands run without a sandbox)"
        )
    return mode


def _approval_mode(value: str | None, where: str) -> Literal["auto", "ask"]:
    mode = (value or "auto").strip()
    if mode not in APPROVAL_MODES:
        raise ConfigError(
            f"{where}={mode!r} is not an approval mode; use auto (the default: the tools act at once, "
            "inside the sandbox) or ask (shell commands and writes wait for your yes/no/always)"
        )
    return cast(Literal["auto", "ask"], mode)


def _rule_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f'{where} must be a list of strings, e.g. deny = ["vendor/**"]')
    for item in value:
        _text(item, where)
        if not item.strip():
            raise ConfigError(f"{where} holds an empty pattern; remove it")
    return tuple(item.strip() for item in value)


def _rules(merged: dict[str, Any] | None, where: _Where) -> dict[str, tuple[str, ...]]:
    """The `[rules]` table: allow lists first-wins (merged), deny rules from every file added up."""
    tables = [(str(path), data.get("rules")) for path, data in where.files() if "rules" in data]
    if merged is not None:
        tables.insert(0, ("AVIBE_RULES" if where.in_env("rules") else where.file_of("rules"), merged))
    found: dict[str, tuple[str, ...]] = {key: () for key in RULE_KEYS}
    deny: list[str] = []
    for origin, table in tables:
        if not isinstance(table, dict):
            raise ConfigError(f'{origin}: rules must be a table, e.g. [rules] deny = ["vendor/**"]')
        unknown = sorted(set(table) - set(RULE_KEYS))
        if unknown:
            raise ConfigError(
                f"{origin}: unknown rule {unknown[0]!r} in [rules] (the rules are {', '.join(RULE_KEYS)})"
            )
        for key in RULE_KEYS:
            if key in table:
                values = _rule_list(table[key], f"{origin}: rules.{key}")
                if key == "deny":
                    deny.extend(v for v in values if v not in deny)
    if merged is not None:
        found = {key: _rule_list(merged[key], key) if key in merged else () for key in RULE_KEYS}
    found["deny"] = tuple(deny)
    if any(found.values()):
        from avibe.tools.approval import Rules  # patterns checked here, named with their setting

        try:
            Rules(**found)
        except ValueError as exc:
            raise ConfigError(f"[rules]: {exc}") from None
    return found


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    project_dir: Path | None = None,
    user_config: Path | None = None,
) -> Settings:
    """Read the settings (environment, then the project's and the user's config.toml); raise ConfigError
    naming the bad variable or file. `env` replaces os.environ (tests); `project_dir` the current
    directory; `user_config` the user's config file. Nothing is created or written here."""
    environ = os.environ if env is None else env
    files = _config_files(project_dir, user_config)
    raw = _raw_layers(environ, files)
    where = _Where(environ, files)
    home = _folder(raw.home, where("home"), _default_home())
    return Settings(
        home=home,
        database_url=_database_url(raw.database_url, where("database_url"), home),
        model=(_text(raw.model, where("model")) or "").strip() or DEFAULT_MODEL,
        user_name=(_text(raw.user, where("user")) or "").strip() or _login_name(),
        model_cache=_folder(raw.model_cache, where("model_cache"), _default_cache()),
        model_window=_window(raw.model_window, where("model_window")),
        sandbox=_sandbox_mode(raw.sandbox, where("sandbox")),
        approval=_approval_mode(raw.approval, where("approval")),
        serve_url=_serve_url(raw.serve_url, where("serve_url")),
        **_rules(raw.rules, where),
    )


DEFAULT_SERVE_URL: Final = "http://127.0.0.1:8765"


def _serve_url(value: str | None, where: str) -> str:
    """`http://HOST:PORT` where `vibe serve` listens (issue 12); loopback unless said otherwise."""
    from urllib.parse import urlsplit

    text = (_text(value, where) or "").strip().rstrip("/") or DEFAULT_SERVE_URL
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: {text!r} is not a URL ({exc})") from None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ConfigError(f"{where}: {text!r} must be http://HOST:PORT, e.g. {DEFAULT_SERVE_URL}")
    return text
