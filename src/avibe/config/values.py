"""The settings' values: each raw value checked and parsed (a ConfigError that names the variable or the
file and says what to set), the defaults, and which of two values is the stricter - what a project's
config may apply without trust (avibe.config.trust)."""

from __future__ import annotations

import getpass
import re
from collections.abc import Collection
from pathlib import Path
from typing import Final, Literal, cast

from avibe.errors import ConfigError

# Vibey's agent on the 1.5B tier by default (measured in docs/configuration.md): the 0.5B
# ended "Say hi in five words" and a three-step edit in a loop stop; the 1.5B answered in one step.
DEFAULT_MODEL = "embedded-1.5b"
MIN_WINDOW: Final = 256  # below this no system prompt, let alone a checkpoint, fits
MAX_WINDOW: Final = 2**31 - 1  # llama.cpp's n_ctx is a C int; no model has more
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
SANDBOX_MODES: Final = ("read-only", "workspace-write", "full-access")
APPROVAL_MODES: Final = ("auto", "ask")  # avibe.tools.approval.APPROVAL_MODES (a test keeps them equal)
# avibe.context.assemble.RENDERINGS, spelled out: the edge does not import the core's texts (a test in
# tests/context/test_recollection_renderings.py keeps the two lists equal).
RECOLLECTION_RENDERINGS: Final = ("sections", "rules-last", "plain")
DEFAULT_SERVE_URL: Final = "http://127.0.0.1:8765"


def login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        return "user"


def default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("avibe", appauthor=False))


def default_cache() -> Path:
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


def parse_text(value: str | None, where: str) -> str | None:
    """A setting's text: None when unset; refused when it holds controls or cannot be encoded."""
    if value is None:
        return None
    if not value.isprintable():
        raise ConfigError(f"{where}={value!r} contains control or unencodable characters; set plain text")
    return value


def parse_folder(value: str | None, where: str, default: Path) -> Path:
    """A folder setting: it, or the nearest folder above it that exists, must be a folder."""
    text = parse_text(value, where)
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


def parse_database_url(value: str | None, where: str, home: Path) -> str:
    if value is None:
        return f"sqlite:///{home / 'avibe.db'}"
    from avibe.store.open import is_in_memory

    text = parse_text(value, where) or ""
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


def parse_window(value: int | str | None, where: str) -> int | None:
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


def parse_sandbox(value: str | None, where: str) -> str:
    # The modes of avibe.tools.sandbox.MODES, spelled out: the edge does not import the tools (a test
    # in tests/tools/test_sandbox.py keeps the two lists equal).
    use = "workspace-write (the default), read-only, or full-access (commands run without a sandbox)"
    return _one_of(value, where, "workspace-write", SANDBOX_MODES, "a sandbox mode", use)


def parse_approval(value: str | None, where: str) -> Literal["auto", "ask"]:
    use = (
        "auto (the default: the tools act at once, inside the sandbox) or ask (shell commands and writes "
        "wait for your yes/no/always)"
    )
    return cast(
        Literal["auto", "ask"], _one_of(value, where, "auto", APPROVAL_MODES, "an approval mode", use)
    )


def parse_recollection(value: str | None, where: str) -> str:
    use = (
        "sections (the default), rules-last (the user's standing rules restated last) or plain (short, no "
        "headings)"
    )
    return _one_of(value, where, "sections", RECOLLECTION_RENDERINGS, "a recollection rendering", use)


def parse_compaction(value: str | None, where: str) -> str:
    """How Vibey makes room when its view outgrows the window: a name of `avibe.agent.compaction`'s
    registry (read when a value is given: the registry imports the agent, which most commands never load)."""
    if value is None or not value.strip():
        return "checkpoint"
    from avibe.agent.compaction import compaction_names

    names = compaction_names()
    use = f"checkpoint (the default) or one of {', '.join(n for n in names if n != 'checkpoint')}"
    return _one_of(value, where, "checkpoint", names, "a compaction", use)


def parse_switch(value: str | None, where: str) -> bool:
    """An on/off setting (network, host_sockets): off unless set to on."""
    return _one_of(value, where, "off", ("on", "off"), "on or off", "on or off (the default)") == "on"


def parse_rule_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f'{where} must be a list of strings, e.g. deny = ["vendor/**"]')
    for item in value:
        parse_text(item, where)
        if not item.strip():
            raise ConfigError(f"{where} holds an empty pattern; remove it")
    return tuple(item.strip() for item in value)


def parse_serve_url(value: str | None, where: str) -> str:
    """`http://HOST:PORT` where `vibe serve` listens; loopback unless said otherwise."""
    from urllib.parse import urlsplit

    text = (parse_text(value, where) or "").strip().rstrip("/") or DEFAULT_SERVE_URL
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: {text!r} is not a URL ({exc})") from None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ConfigError(f"{where}: {text!r} must be http://HOST:PORT, e.g. {DEFAULT_SERVE_URL}")
    return text


def is_loopback(url: str) -> bool:
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    try:
        return host in LOOPBACK_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- which of two values is the stricter: what a project's config may set without trust ------------------


def any_rendering(new: str, old: str) -> bool:
    """Every rendering shows the same checkpoint with the same guarantees (the memo verbatim and framed as
    the user's, non-user text framed): choosing one loosens nothing, so a project may."""
    return True


def stricter_switch(new: bool, old: bool) -> bool:
    return not new or new == old


def stricter_sandbox(new: str, old: str) -> bool:
    return SANDBOX_MODES.index(new) <= SANDBOX_MODES.index(old)


def stricter_approval(new: str, old: str) -> bool:
    return new == "ask" or new == old


def smaller_window(new: int | None, old: int | None) -> bool:
    """A window setting only ever caps the model's window (providers.facts.model_facts)."""
    return new is not None and (old is None or new <= old)
