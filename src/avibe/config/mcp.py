"""The MCP servers in force (docs/mcp.md): the user's `[mcp.servers.NAME]` tables, and a project's own -
the `[mcp]` of its `.avibe/config.toml` and Claude Code's `.mcp.json` beside it - only when the user's
config trusts the project (`trusted_projects`): a server is a program Avibe starts, and the project's
files are the agent's to write. An untrusted project's servers are named on stderr and ignored."""

from __future__ import annotations

import json

from avibe.config.layers import PROJECT_CONFIG_MAX_BYTES
from avibe.config.trust import TRUST_KEY, Sources
from avibe.errors import ConfigError
from avibe.mcp.config import McpServer, from_claude_json, merge, parse_mcp_table

CLAUDE_PROJECT_FILE = ".mcp.json"


def mcp_servers(sources: Sources) -> tuple[McpServer, ...]:
    """The servers in force, a trusted project's first (first wins by name, as every setting)."""
    user = sources.user
    mine = parse_mcp_table(user.values["mcp"], str(user.path)) if "mcp" in user.values else ()
    project: tuple[McpServer, ...] = ()
    if "mcp" in sources.project.values:
        if sources.trusted:
            project = parse_mcp_table(sources.project.values["mcp"], str(sources.project.path))
        else:
            _ignore(sources, f"the [mcp] servers in {sources.project.path}")
    claude = _claude_file(sources)
    return merge(project, claude, mine)


def _claude_file(sources: Sources) -> tuple[McpServer, ...]:
    """The project's `.mcp.json`, read the one way the harness reads the workdir (no link followed)."""
    from avibe.sources.agent_files import read_agent_file

    if sources.folder is None:
        return ()
    found = read_agent_file(sources.folder, CLAUDE_PROJECT_FILE, max_bytes=PROJECT_CONFIG_MAX_BYTES)
    if found.status == "missing":
        return ()
    if not sources.trusted:
        _ignore(sources, f"the MCP servers in {found.path}")
        return ()
    if not found.ok:
        raise ConfigError(f"{found.line()}; make it a regular file in the project, or remove it")
    try:
        data = json.loads(found.text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{found.path} is not valid JSON ({exc}); fix or remove it") from None
    return from_claude_json(data, str(found.path))


def _ignore(sources: Sources, what: str) -> None:
    sources.warnings.append(
        f"ignoring {what}: a project's MCP servers are programs Avibe would start, so they are used only "
        f'from a trusted project; to use them, add "{sources.folder}" to {TRUST_KEY} in {sources.user.path}'
    )
