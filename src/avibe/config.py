"""Settings: one object, read once at the edge (STYLE 9). Every field is documented in the README.

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
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from avibe.errors import ConfigError

DEFAULT_MODEL = "embedded"


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path
    database_url: str
    model: str
    user_name: str
    model_cache: Path
    model_window: int | None = None

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def sessions_dir(self) -> Path:
        """Per-session temporary directories (checkpoint files, F2) and live state live below this."""
        return self.home / "sessions"


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


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from the environment; raise ConfigError naming the bad variable."""
    env = os.environ if env is None else env
    home = Path(env["AVIBE_HOME"]).expanduser() if env.get("AVIBE_HOME") else _default_home()
    if home.exists() and not home.is_dir():
        raise ConfigError(f"AVIBE_HOME={home} is not a directory; point it at a directory")
    url = env.get("AVIBE_DATABASE_URL") or f"sqlite:///{home / 'avibe.db'}"
    if not url.startswith(("sqlite:", "postgresql")):
        raise ConfigError(
            f"AVIBE_DATABASE_URL={url!r} is not supported; use sqlite:///PATH or postgresql+psycopg://..."
        )
    cache = Path(env["AVIBE_MODEL_CACHE"]).expanduser() if env.get("AVIBE_MODEL_CACHE") else _default_cache()
    return Settings(
        home=home,
        database_url=url,
        model=env.get("AVIBE_MODEL") or DEFAULT_MODEL,
        user_name=env.get("AVIBE_USER") or _login_name(),
        model_cache=cache,
        model_window=_positive_int(env, "AVIBE_MODEL_WINDOW"),
    )


def _positive_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if not raw:
        return None
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise ConfigError(f"{name}={raw!r} is not a positive whole number of tokens; e.g. {name}=32768")
    return int(raw)
