"""`vibe mcp add/list/remove/import`: the MCP servers in the person's own config.toml (docs/mcp.md).

`add` and `remove` change only the `[mcp.servers.NAME]` table (every other line stays as written) and
read the file back before it is replaced; `import` copies the servers of Claude Code's `.mcp.json` or
Codex's `config.toml` (`[mcp_servers]`) into it. `list` shows the servers in force here, and with
`--session S` (the chat's `/mcp`) the live state of the session's servers in this process: started or
not and why, their tools and what their schemas cost in tokens.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Annotated

import typer

from avibe.cli.options import BadArgument
from avibe.config import load_settings, user_config_file
from avibe.errors import ConfigError

mcp_app = typer.Typer(help="MCP servers: their tools become Vibey's (docs/mcp.md).", no_args_is_help=True)

Pairs = Annotated[list[str] | None, typer.Option(help="NAME=VALUE; repeat for more.")]


def _pairs(items: list[str] | None, option: str) -> tuple[tuple[str, str], ...]:
    found = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadArgument(f"{option} {item!r} is not NAME=VALUE")
        found.append((key.strip(), value))
    return tuple(found)


def _write(path: Path, text: str) -> None:
    """Replace the file at once (a crash leaves the old one or the new one), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); fix or remove it") from None


@mcp_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The server's name: its tools are NAME.tool.")],
    command: Annotated[
        list[str] | None, typer.Argument(help="The command and its arguments (stdio).")
    ] = None,
    url: Annotated[str, typer.Option(help="A streamable HTTP server's URL instead of a command.")] = "",
    env: Pairs = None,
    header: Pairs = None,
    cwd: Annotated[str, typer.Option(help="Where it runs, relative to the working directory.")] = "",
    network: Annotated[bool, typer.Option(help="Give the sandboxed server a network.")] = False,
    timeout: Annotated[float | None, typer.Option(help="Seconds a call may take (default 30).")] = None,
) -> None:
    """Add a server to your config.toml: `vibe mcp add NAME -- COMMAND ARGS...` or `--url URL`."""
    from avibe.mcp.config import parse_server
    from avibe.mcp.edit import added, table_text

    path = user_config_file()
    table: dict[str, object] = {"command": " ".join(command[:1]) if command else "", "url": url}
    table.update(args=list(command[1:]) if command else [], env=dict(_pairs(env, "--env")), cwd=cwd)
    table.update(headers=dict(_pairs(header, "--header")), network="on" if network else "off")
    if timeout is not None:
        table["timeout_s"] = timeout
    server = parse_server(name, table, "vibe mcp add")
    assert server is not None  # enabled: never switched off here
    _write(path, added(_read(path), server, str(path)))
    typer.echo(f"added to {path}:\n{table_text(server)}".rstrip())


@mcp_app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The server's name.")]) -> None:
    """Remove a server's table from your config.toml."""
    from avibe.mcp.edit import removed

    path = user_config_file()
    _write(path, removed(_read(path), name, str(path)))
    typer.echo(f"removed {name} from {path}")


@mcp_app.command("import")
def import_servers(
    source: Annotated[Path, typer.Argument(help="Claude Code's .mcp.json, or Codex's config.toml.")],
) -> None:
    """Copy the servers of a Claude Code `.mcp.json` or a Codex `config.toml` into your config.toml."""
    from avibe.mcp.config import from_claude_json, from_codex_toml
    from avibe.mcp.edit import added

    text = _read(source)
    if not source.is_file():
        raise BadArgument(f"{source} is not a file")
    try:
        servers = (
            from_codex_toml(tomllib.loads(text), str(source))
            if source.suffix == ".toml"
            else from_claude_json(json.loads(text), str(source))
        )
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"{source} cannot be read ({exc}); is it a .mcp.json or a Codex config.toml?"
        ) from None
    path = user_config_file()
    config = _read(path)
    for server in servers:
        config = added(config, server, str(path))
    _write(path, config)
    names = ", ".join(s.name for s in servers) or "none"
    typer.echo(f"imported {len(servers)} server(s) into {path}: {names}")


@mcp_app.command("list")
def list_servers(
    session: Annotated[str | None, typer.Option(help="Show the live servers of this session (/mcp).")] = None,
) -> None:
    """The MCP servers in force here; with --session, their state in the session hosted by this process."""
    from avibe.mcp.servers import live_servers

    live = live_servers(session) if session else None
    if live is not None:
        typer.echo("\n".join(live.status()) or "no MCP servers are configured")
        return
    servers = load_settings().mcp_servers
    if session:
        typer.echo(f"(session {session} is not hosted in this process: the servers as configured)")
    for server in servers:
        typer.echo(f"{server.name}  {server.transport}  {server.target}  (from {server.origin})")
    if not servers:
        typer.echo(f"no MCP servers are configured; add one with `vibe mcp add` (in {user_config_file()})")


def register(app: typer.Typer) -> None:
    app.add_typer(mcp_app, name="mcp")
