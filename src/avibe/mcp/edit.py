"""`[mcp.servers.NAME]` tables added to and removed from the text of the person's config.toml, keeping
every other line (comments included) as it was; each result is parsed again and checked before it is
written (avibe.cli.mcp). Pure: text in, text out."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from avibe.errors import ConfigError
from avibe.mcp.config import McpServer, parse_mcp_table


def _value(value: Any) -> str:
    """A TOML value: strings in JSON's escapes (a subset of TOML's basic strings), lists, inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value), ensure_ascii=False)


def table_text(server: McpServer) -> str:
    lines = [f"[mcp.servers.{server.name}]"]
    lines += [f"{key} = {_value(value)}" for key, value in server.to_table().items()]
    return "\n".join(lines) + "\n"


def configured(text: str, origin: str) -> tuple[McpServer, ...]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin} is not valid TOML ({exc}); fix it first") from None
    return parse_mcp_table(data["mcp"], origin) if "mcp" in data else ()


def _names(text: str, origin: str) -> set[str]:
    """Every server named in the file, `enabled = false` ones too."""
    data = tomllib.loads(text) if text.strip() else {}
    servers = data.get("mcp", {}).get("servers", {}) if isinstance(data.get("mcp"), dict) else {}
    return set(servers) if isinstance(servers, dict) else set()


def added(text: str, server: McpServer, origin: str) -> str:
    """`text` with a table for `server` at its end; refused when a server of that name is there."""
    configured(text, origin)
    if server.name in _names(text, origin):
        raise ConfigError(f"an MCP server named {server.name} is already in {origin}; remove it first")
    joined = text if not text or text.endswith("\n") else text + "\n"
    new = f"{joined}\n{table_text(server)}" if joined else table_text(server)
    if server.name not in {s.name for s in configured(new, origin)}:
        raise ConfigError(f"the table for {server.name} did not read back from {origin}; add it by hand")
    return new


def removed(text: str, name: str, origin: str) -> str:
    """`text` without the `[mcp.servers.NAME]` table and its sub-tables (`[mcp.servers.NAME.env]`)."""
    configured(text, origin)
    if name not in _names(text, origin):
        raise ConfigError(f"no MCP server named {name} in {origin}")
    header = re.compile(
        rf'\s*\[\s*mcp\s*\.\s*servers\s*\.\s*(?:{re.escape(name)}|"{re.escape(name)}")\s*[.\]]'
    )
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"\s*\[", line):
            skipping = bool(header.match(line))
        if not skipping:
            kept.append(line)
    new = "".join(kept)
    if name in _names(new, origin):
        raise ConfigError(
            f"{name} is not written as a [mcp.servers.{name}] table in {origin}; remove it by hand"
        )
    return new
