"""MCP servers as the person configures them (docs/mcp.md): `[mcp.servers.NAME]` tables in a config.toml,
and the files of the peers whose users already have servers configured - Claude Code's `.mcp.json`
(`{"mcpServers": {NAME: {...}}}`) and Codex's `[mcp_servers.NAME]` tables.

    [mcp.servers.tracker]            # a stdio server: a program Avibe starts (in the sandbox)
    command = "uvx"
    args = ["tracker-mcp", "--readonly"]
    env = { TRACKER_TOKEN = "..." }  # added to the allow-listed environment
    cwd = "tools"                    # relative to the working directory (default: the working directory)
    network = "on"                   # its own network, in the sandboxed modes (default off)
    timeout_s = 60                   # a call's limit (default 30); startup_timeout_s (default 15)

    [mcp.servers.docs]               # a streamable HTTP server
    url = "https://docs.example.com/mcp"
    headers = { Authorization = "Bearer ..." }

Every value is checked here, and a bad one is a ConfigError naming the server, the key and the place.
Parsing is pure: the callers read the files (avibe.config for the settings, avibe.cli.mcp for imports).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from avibe.errors import ConfigError

DEFAULT_TIMEOUT_S: Final = 30.0
DEFAULT_STARTUP_TIMEOUT_S: Final = 15.0
DEFAULT_RESTARTS: Final = 2
MAX_TIMEOUT_S: Final = 3600.0
# A server's name is the first half of its tools' names (`NAME.tool`): letters, digits, `-` and single
# `_`, so that the hosted providers' `NAME__tool` (no dot allowed there) maps back unambiguously.
# (An `_` is never last nor doubled: `a_.b` would go as `a___b` and come back as `a._b`; a test checks.)
NAME: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?=[A-Za-z0-9-])){0,31}")
_KEYS: Final = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "network", "timeout_s", "startup_timeout_s",
     "restarts", "enabled"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class McpServer:
    """One configured server: stdio (`command`) or streamable HTTP (`url`), never both."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold a token
    cwd: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold a token
    network: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    restarts: int = DEFAULT_RESTARTS
    origin: str = ""  # the file it came from, for messages

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    @property
    def target(self) -> str:
        """What it runs or reaches, for listings: the command line, or the URL."""
        return " ".join((self.command, *self.args)) if self.command else self.url

    def to_table(self) -> dict[str, Any]:
        """The `[mcp.servers.NAME]` table that configures it (what `vibe mcp add` writes)."""
        table: dict[str, Any] = {"command": self.command} if self.command else {"url": self.url}
        optional: dict[str, Any] = {
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": self.cwd,
            "headers": dict(self.headers),
            "network": "on" if self.network else "",
        }
        table.update({key: value for key, value in optional.items() if value})
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            table["timeout_s"] = self.timeout_s
        return table


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.isprintable():
        raise ConfigError(f"{where} must be plain text, got {value!r:.60}")
    return value


def _texts(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f'{where} must be a list of strings, e.g. ["--port", "8080"]')
    return tuple(_text(item, where) for item in value)


def _pairs(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f'{where} must be a table of strings, e.g. {{ NAME = "value" }}')
    return tuple((_text(k, where), _text(v, f"{where}.{k}")) for k, v in value.items())


def _seconds(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_S:
        raise ConfigError(f"{where} must be a number of seconds between 0 and {MAX_TIMEOUT_S:g}")
    return float(value)


def _switch(value: object, where: str) -> bool:
    if value in (True, "on"):
        return True
    if value in (False, "off"):
        return False
    raise ConfigError(f'{where} must be "on" or "off"')


def check_name(name: str, where: str) -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: the server name {name!r} must be 1-32 letters, digits, '-' or single '_' inside (it "
            "prefixes its tools' names)"
        )
    return name


def parse_server(name: str, table: object, origin: str) -> McpServer | None:
    """One `[mcp.servers.NAME]` table; None when it says `enabled = false`."""
    where = f"{origin}: mcp.servers.{name}"
    check_name(name, where)
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table with command (stdio) or url (streamable HTTP)")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (the keys are {', '.join(sorted(_KEYS))})")
    if not _switch(table.get("enabled", True), f"{where}.enabled"):
        return None
    command = _text(table.get("command", ""), f"{where}.command").strip()
    url = _text(table.get("url", ""), f"{where}.url").strip()
    if bool(command) == bool(url):
        raise ConfigError(f"{where} needs exactly one of command (a stdio server) or url (streamable HTTP)")
    if url and not re.match(r"https?://[^/\s?#]+", url):
        raise ConfigError(f"{where}.url must be http:// or https:// and a host, got {url!r:.60}")
    restarts = table.get("restarts", DEFAULT_RESTARTS)
    if isinstance(restarts, bool) or not isinstance(restarts, int) or not 0 <= restarts <= 10:
        raise ConfigError(f"{where}.restarts must be a whole number from 0 to 10")
    return McpServer(
        name=name,
        command=command,
        args=_texts(table.get("args", []), f"{where}.args"),
        env=_pairs(table.get("env", {}), f"{where}.env"),
        cwd=_text(table.get("cwd", ""), f"{where}.cwd"),
        url=url,
        headers=_pairs(table.get("headers", {}), f"{where}.headers"),
        network=_switch(table.get("network", "off"), f"{where}.network"),
        timeout_s=_seconds(table.get("timeout_s", DEFAULT_TIMEOUT_S), f"{where}.timeout_s"),
        startup_timeout_s=_seconds(
            table.get("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S), f"{where}.startup_timeout_s"
        ),
        restarts=restarts,
        origin=origin,
    )


def parse_mcp_table(table: object, origin: str) -> tuple[McpServer, ...]:
    """The servers of a config file's `[mcp]` table (`servers` its only key)."""
    if not isinstance(table, Mapping) or set(table) - {"servers"}:
        raise ConfigError(f"{origin}: mcp must be a table of servers, e.g. [mcp.servers.NAME]")
    servers = table.get("servers", {})
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{origin}: mcp.servers must be a table of [mcp.servers.NAME] tables")
    parsed = (parse_server(str(name), value, origin) for name, value in servers.items())
    return tuple(server for server in parsed if server is not None)


def merge(*layers: tuple[McpServer, ...]) -> tuple[McpServer, ...]:
    """The servers of several sources, first wins by name (the settings' rule)."""
    found: dict[str, McpServer] = {}
    for layer in layers:
        for server in layer:
            found.setdefault(server.name, server)
    return tuple(found.values())


# ---- the peers' files ---------------------------------------------------------------------------------


def from_claude_json(data: object, origin: str) -> tuple[McpServer, ...]:
    """Claude Code's `.mcp.json` (or `~/.claude.json`): `mcpServers` with `command`/`args`/`env` or
    `type` "http" with `url`/`headers`. An SSE server (the protocol's old transport) is refused by name."""
    servers = data.get("mcpServers") if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError(f'{origin} has no "mcpServers" object; is it a Claude Code .mcp.json?')
    found: list[McpServer] = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{origin}: mcpServers.{name} must be an object")
        if entry.get("type") == "sse":
            raise ConfigError(f"{origin}: mcpServers.{name} uses SSE, which Avibe does not speak; use its "
                              "streamable HTTP URL")  # fmt: skip
        keys = ("command", "args", "env", "cwd", "url", "headers")
        server = parse_server(str(name), {k: entry[k] for k in keys if k in entry}, origin)
        found.extend(() if server is None else (server,))
    return tuple(found)


def from_codex_toml(data: object, origin: str) -> tuple[McpServer, ...]:
    """Codex's `config.toml`: `[mcp_servers.NAME]` with `command`/`args`/`env`/`cwd` or `url`/
    `http_headers`, `startup_timeout_sec`, `tool_timeout_sec`, `enabled`."""
    servers = data.get("mcp_servers") if isinstance(data, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{origin} has no [mcp_servers] tables; is it a Codex config.toml?")
    renamed = {"http_headers": "headers", "tool_timeout_sec": "timeout_s", "startup_timeout_sec":
               "startup_timeout_s"}  # fmt: skip
    keys = ("command", "args", "env", "cwd", "url", "enabled", *renamed)
    found: list[McpServer] = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{origin}: mcp_servers.{name} must be a table")
        table = {renamed.get(k, k): entry[k] for k in keys if k in entry}
        server = parse_server(str(name), table, origin)
        found.extend(() if server is None else (server,))
    return tuple(found)
