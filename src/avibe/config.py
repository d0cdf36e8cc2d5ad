"""Settings: one object, read once at the edge (STYLE 9). Every field is documented in docs/configuration.md.

Sources, first wins: the environment (AVIBE_*), the project's `.avibe/config.toml` (in the current
directory), the user's `config.toml` in the platform's user config dir (`~/.config/avibe/config.toml`),
then the defaults. Trust comes from outside the workdir (issue 27 item 1): the project's file lives where
the agent can write, so it may only tighten - a stricter sandbox (read-only < workspace-write <
full-access), ask instead of auto, more deny rules, a smaller model_window, an allow list the user's
settings already cover - unless the user's own file lists the project (resolved) in
`trusted_projects = ["/abs/path", ...]`; then it applies in full. A project value that would loosen is
ignored and named in `Settings.warnings`; every loosened setting in force is in `Settings.announcements`
(the CLI prints both at every start). What an untrusted project's file tightened is remembered in Avibe's
home and stays in force when the file goes, breaks or loosens (avibe.tightening). The files use the
field names below as keys (`user` for AVIBE_USER), e.g. `model = "anthropic/claude-sonnet-4-5"`. Read
with pydantic-settings; every bad value is a ConfigError that names the variable or the file and says what
to set.

| field         | environment              | default                                            |
|---------------|--------------------------|----------------------------------------------------|
| home          | AVIBE_HOME               | the platform's user data dir (platformdirs)        |
| database_url  | AVIBE_DATABASE_URL       | sqlite:///<home>/avibe.db (WAL)                    |
| model         | AVIBE_MODEL              | embedded-1.5b (Qwen2.5-Coder-1.5B on llama.cpp)     |
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
| serve_url     | AVIBE_SERVE_URL          | http://127.0.0.1:8765 (where `vibe serve` listens)  |
| recollection  | AVIBE_RECOLLECTION       | sections; rules-last, plain: how the checkpoint is  |
|               |                          | shown to the model (avibe/context/assemble.py); a   |
|               |                          | project may set it (it changes no content, no trust)|
| network       | AVIBE_NETWORK            | off: sandboxed commands have no network, loopback   |
|               |                          | included; on (yours only: a project cannot open it) |
| host_sockets  | AVIBE_HOST_SOCKETS       | off: /run, $XDG_RUNTIME_DIR, the ssh-agent's socket |
|               |                          | are covered in the sandbox; on (yours only)          |
| deny, allow_commands, allow_writes | the `[rules]` table of a config.toml | none (issue 11 item 9) |
| trusted_projects | - (the user's config.toml only) | none: no project config loosens anything     |

`[rules]` (e.g. `deny = ["vendor/**"]`): the file tools never change a path a deny rule matches; the
deny rules of every file add up (a rule only ever refuses more), while `allow_commands` and
`allow_writes` follow first-wins like every other setting (a project's list within the trust rule above).
`trusted_projects` is read from the user's file only.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, cast

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
from avibe.tightening import HELD_KEYS, Remembered, Tightening, asked, hold, pending, project_state, recall

# Vibey's agent on the 1.5B tier by default (issue 32 item 2, measured in docs/configuration.md): the 0.5B
# ended "Say hi in five words" and a three-step edit in a loop stop; the 1.5B answered in one step.
DEFAULT_MODEL = "embedded-1.5b"
MIN_WINDOW: Final = 256  # below this no system prompt, let alone a checkpoint, fits
MAX_WINDOW: Final = 2**31 - 1  # llama.cpp's n_ctx is a C int; no model has more
PROJECT_CONFIG: Final = Path(".avibe") / "config.toml"
PROJECT_CONFIG_MAX_BYTES: Final = 1024 * 1024  # a settings file; more is refused with one line
TRUST_KEY: Final = "trusted_projects"
# Issue 27 item 1: a project config may set these only when the user trusts the project.
TRUSTED_ONLY: Final = ("home", "database_url", "model", "user", "model_cache", "serve_url")
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
SANDBOX_MODES: Final = ("read-only", "workspace-write", "full-access")
APPROVAL_MODES: Final = ("auto", "ask")  # avibe.tools.approval.APPROVAL_MODES (a test keeps them equal)
RULE_KEYS: Final = ("deny", "allow_commands", "allow_writes")
MAX_DEPTH: Final = 8  # tables and lists within each other: the settings need 3 ([rules] deny = [...])
# avibe.context.assemble.RENDERINGS, spelled out: the edge does not import the core's texts (a test in
# tests/context/test_recollection_renderings.py keeps the two lists equal). Issue 31 item 3.
RECOLLECTION_RENDERINGS: Final = ("sections", "rules-last", "plain")


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
    recollection: str = "sections"  # how the checkpoint is shown to the model (issue 31 item 3)
    network: bool = False  # sandboxed commands reach the network (issue 48; avibe/tools/sandbox.py)
    host_sockets: bool = False  # sandboxed commands reach the host's Unix sockets (avibe/tools/reach.py)
    trusted_projects: tuple[Path, ...] = ()  # resolved; their .avibe/ is read-only in any sandbox
    # Issue 27 item 1: what every start says on stderr (one line each, `vibe: ` in front): project values
    # ignored because they would loosen, then the loosened settings in force.
    warnings: tuple[str, ...] = ()
    announcements: tuple[str, ...] = ()
    # What this start remembers of the project's tightening (avibe.tightening), written when a session
    # starts (avibe.cli.terminal.announce); None: nothing new.
    remember: Remembered | None = None

    @property
    def notices(self) -> tuple[str, ...]:
        return (*self.warnings, *self.announcements)

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
    recollection: str | None = None
    network: str | None = None
    host_sockets: str | None = None
    trusted_projects: list[str] | None = None  # read from the user's config only


class _MappingEnv(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (load_settings(env) reads only `env`)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {
            key: value
            for key, value in environ.items()
            if key.startswith("AVIBE_") and key != "AVIBE_TRUSTED_PROJECTS"  # trust: the user's file only
        }
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

    class Given(_Layers):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (InitSettingsSource(settings_cls, init_kwargs=values),)

    return Given


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


def _one_of(
    value: str | None, where: str, default: str, allowed: Collection[str], kind: str, use: str
) -> str:
    """A setting that names one of a few choices, with an error that lists them."""
    chosen = (value or default).strip()
    if chosen not in allowed:
        raise ConfigError(f"{where}={chosen!r} is not {kind}; use {use}")
    return chosen


def _sandbox_mode(value: str | None, where: str) -> str:
    # The modes of avibe.tools.sandbox.MODES, spelled out: the edge does not import the tools (a test
    # in tests/tools/test_sandbox.py keeps the two lists equal).
    use = "workspace-write (the default), read-only, or full-access (commands run without a sandbox)"
    return _one_of(value, where, "workspace-write", SANDBOX_MODES, "a sandbox mode", use)


def _approval_mode(value: str | None, where: str) -> Literal["auto", "ask"]:
    use = (
        "auto (the default: the tools act at once, inside the sandbox) or ask (shell commands and writes "
        "wait for your yes/no/always)"
    )
    return cast(
        Literal["auto", "ask"], _one_of(value, where, "auto", APPROVAL_MODES, "an approval mode", use)
    )


def _recollection(value: str | None, where: str) -> str:
    use = (
        "sections (the default), rules-last (the user's standing rules restated last) or plain (short, no "
        "headings)"
    )
    return _one_of(value, where, "sections", RECOLLECTION_RENDERINGS, "a recollection rendering", use)


def _any_rendering(new: str, old: str) -> bool:
    """Every rendering shows the same checkpoint with the same guarantees (the memo verbatim and framed as
    the user's, non-user text framed): choosing one loosens nothing, so a project may."""
    return True


def _rule_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f'{where} must be a list of strings, e.g. deny = ["vendor/**"]')
    for item in value:
        _text(item, where)
        if not item.strip():
            raise ConfigError(f"{where} holds an empty pattern; remove it")
    return tuple(item.strip() for item in value)


# load_settings and the trust rules: below


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


# -- the sources and the trust rules (issue 27 item 1) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Layer:
    """One source's values (the keys it sets, typed by _Layers); `path` is None for the environment."""

    path: Path | None
    values: dict[str, Any]

    def where(self, key: str) -> str:
        """The place of a key, for errors: the variable, or the file and the key."""
        return f"AVIBE_{key.upper()}" if self.path is None else f"{self.path}: {key}"

    def origin(self, key: str) -> str:
        """The place of a key, for announcements: the variable, or the file."""
        return f"AVIBE_{key.upper()}" if self.path is None else str(self.path)


def _validation_problems(exc: ValidationError, layer: _Layer) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            known = ", ".join(_Layers.model_fields)
            problems.append(f"unknown setting {key!r} in {layer.path} (the keys are {known})")
        else:
            problems.append(f"{layer.where(key)}: {error['msg']}")
    return "; ".join(problems)


def _read_layer(environ: Mapping[str, str], path: Path | None) -> _Layer:
    """The values one source sets: the environment (`path` None) or one config file (absent: none). A
    project's `.avibe/config.toml` is read once, safely (`_read_project_toml`), and those very values are
    checked - never the file again by path."""
    layer = _Layer(path, {})
    if path is not None and path.parts[-2:] == PROJECT_CONFIG.parts:
        values = _read_project_toml(path)
        if values is None:
            return layer
        try:
            checked = _given_class(values)()
        except ValidationError as exc:
            raise ConfigError(_validation_problems(exc, layer)) from None
        return _Layer(path, {key: getattr(checked, key) for key in checked.model_fields_set})
    if path is not None:
        if not path.is_file():
            return layer
        _read_toml(path)  # a broken file is named as such
    try:
        raw = _layers_class(environ if path is None else {}, () if path is None else (path,))()
    except ValidationError as exc:
        raise ConfigError(_validation_problems(exc, layer)) from None
    return _Layer(path, {key: getattr(raw, key) for key in raw.model_fields_set})


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


def _checked_layer(environ: Mapping[str, str], path: Path | None) -> _Layer:
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


def _trusted_folders(user: _Layer) -> list[Path]:
    """The user's `trusted_projects`: absolute folders, each resolved (symlinks followed)."""
    listed = user.values.get(TRUST_KEY) or []
    where = user.where(TRUST_KEY)
    folders = []
    for item in listed:
        text = (_text(item, where) or "").strip()
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
class _Sources:
    """The environment, the project's config and the user's, and whether the user trusts the project.
    The environment and the user's config are the user's own; the project's config lives in the workdir,
    which the agent can write, so without trust it may only tighten (issue 27 item 1)."""

    env: _Layer
    project: _Layer
    user: _Layer
    folder: Path | None  # the project folder, resolved
    trusted: bool
    warnings: list[str]
    origins: dict[str, str]  # key -> where the value in force came from (announcements)
    project_error: str | None = None  # the project's file could not be read: why (see `held`)

    @classmethod
    def read(cls, environ: Mapping[str, str], project_dir: Path | None, user_config: Path | None) -> _Sources:
        folder = _project_dir(project_dir)
        user = _checked_layer({}, user_config_file() if user_config is None else user_config)
        resolved = None if folder is None else _resolved(folder)
        trusted = resolved is not None and resolved in _trusted_folders(user)
        project, broken = _Layer(Path(PROJECT_CONFIG), {}), None  # the current directory is gone: no project
        if folder is not None:
            try:
                project = _checked_layer({}, folder / PROJECT_CONFIG)
            except ConfigError as exc:  # fatal unless a record of its tightening stands in (`held`)
                if trusted:
                    raise
                project, broken = _Layer(folder / PROJECT_CONFIG, {}), str(exc)
        env = _checked_layer(environ, None)
        sources = cls(env, project, user, resolved, trusted, [], {}, broken)
        if TRUST_KEY in project.values:
            sources.warnings.append(
                f"ignoring {TRUST_KEY} in {project.path}: only your own config ({user.path}) can trust "
                "a project"
            )
        return sources

    def _own_layers(self) -> tuple[_Layer, ...]:
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

    def announcements(self, settings: Settings) -> tuple[str, ...]:
        """Every loosened setting in force, in plain words, with where it came from."""
        lines = []
        if self.trusted and self.project.values:
            lines.append(
                f"using the project config {self.project.path} in full (the project is trusted in "
                f"{self.user.path})"
            )
        if settings.sandbox == "full-access":
            lines.append(
                f"commands run without a sandbox (sandbox = full-access, from {self.origins['sandbox']})"
            )
        for key, what in (("network", "reach the network"), ("host_sockets", "reach the host's sockets")):
            if getattr(settings, key) and settings.sandbox != "full-access":
                lines.append(f"sandboxed commands {what} ({key} = on, from {self.origins[key]})")
        if settings.approval == "ask" and settings.allow_commands:
            lines.append(
                "shell commands matching allow_commands run without asking "
                f"(from {self.origins['allow_commands']})"
            )
        if settings.approval == "ask" and settings.allow_writes:
            lines.append(
                f"writes matching allow_writes are made without asking (from {self.origins['allow_writes']})"
            )
        if not _loopback(settings.serve_url):
            lines.append(
                f"vibe serve listens beyond this machine (serve_url = {settings.serve_url}, from "
                f"{self.origins['serve_url']})"
            )
        return tuple(lines)


def _rule_table(layer: _Layer) -> dict[str, tuple[str, ...]]:
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
    return {key: _rule_list(table[key], f"{origin}: rules.{key}") for key in RULE_KEYS if key in table}


def _loopback(url: str) -> bool:
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    try:
        return host in LOOPBACK_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _switch(value: str | None, where: str) -> bool:
    """An on/off setting (network, host_sockets): off unless set to on."""
    return _one_of(value, where, "off", ("on", "off"), "on or off", "on or off (the default)") == "on"


def _stricter_switch(new: bool, old: bool) -> bool:
    return not new or new == old


def _stricter_sandbox(new: str, old: str) -> bool:
    return SANDBOX_MODES.index(new) <= SANDBOX_MODES.index(old)


def _stricter_approval(new: str, old: str) -> bool:
    return new == "ask" or new == old


def _smaller_window(new: int | None, old: int | None) -> bool:
    """A window setting only ever caps the model's window (providers.facts.model_facts)."""
    return new is not None and (old is None or new <= old)


def own_home(env: Mapping[str, str] | None = None, *, user_config: Path | None = None) -> Path:
    """Avibe's home as the environment or the user's own config sets it, never a project's: where the
    record of a project's tightening lives, found even when that file or the record is broken."""
    layers = (
        _checked_layer(os.environ if env is None else env, None),
        _checked_layer({}, user_config_file() if user_config is None else user_config),
    )
    layer = next((layer for layer in layers if "home" in layer.values), None)
    if layer is None:
        return _default_home()
    return _folder(layer.values["home"], layer.where("home"), _default_home())


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    project_dir: Path | None = None,
    user_config: Path | None = None,
) -> Settings:
    """Read the settings (environment, then the project's and the user's config.toml); raise ConfigError
    naming the bad variable or file. `env` replaces os.environ (tests); `project_dir` the current
    directory; `user_config` the user's config file. Nothing is created or written here: what a project
    tightened is read from its record in the home, and the record this start leaves is `remember`
    (written where a session starts, avibe.cli.terminal.announce).

    Issue 27 item 1: the project's config may only tighten, unless the user's config lists the project
    in `trusted_projects`; what it tried to loosen is named in `warnings`, and every loosened setting in
    force in `announcements`."""
    sources = _Sources.read(os.environ if env is None else env, project_dir, user_config)
    home = _folder(*sources.raw("home"), _default_home())
    database_url, where = sources.raw("database_url")
    model, model_where = sources.raw("model")
    user, user_where = sources.raw("user")
    cache, cache_where = sources.raw("model_cache")
    serve_url, serve_where = sources.raw("serve_url")
    sandbox = sources.tightened("sandbox", _sandbox_mode, _stricter_sandbox)
    mine_approval = _approval_mode(*sources.mine("approval"))
    approval = sources.tightened("approval", _approval_mode, _stricter_approval)
    window = sources.tightened("model_window", _window, _smaller_window)
    in_force = Tightening(sandbox, approval, window, **sources.rules(mine_approval))
    held, remember = sources.held(home, in_force)  # what the project tightened before stays
    settings = Settings(
        home=home,
        database_url=_database_url(database_url, where, home),
        model=(_text(model, model_where) or "").strip() or DEFAULT_MODEL,
        user_name=(_text(user, user_where) or "").strip() or _login_name(),
        model_cache=_folder(cache, cache_where, _default_cache()),
        model_window=held.model_window,
        sandbox=held.sandbox or sandbox,
        approval="ask" if held.approval == "ask" else "auto",
        deny=held.deny,
        allow_commands=held.allow_commands or (),
        allow_writes=held.allow_writes or (),
        serve_url=_serve_url(serve_url, serve_where),
        recollection=sources.tightened("recollection", _recollection, _any_rendering),
        remember=remember,
        network=sources.tightened("network", _switch, _stricter_switch),
        host_sockets=sources.tightened("host_sockets", _switch, _stricter_switch),
        trusted_projects=tuple(_trusted_folders(sources.user)),
    )
    return replace(settings, warnings=tuple(sources.warnings), announcements=sources.announcements(settings))
