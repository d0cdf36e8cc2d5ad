"""How a server is reached: a stdio server is a program started under the shell's own sandbox policy
(avibe/tools/sandbox.py: in the sandboxed modes bubblewrap, Avibe's files covered, no network unless the
server's own `network = "on"`); in every mode its environment is the shell's allow-list plus the `env`
configured for it - no provider key, no AVIBE_*, no database URL reaches it. A streamable HTTP server is
a URL with the configured headers.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from avibe.errors import ConfigError
from avibe.mcp.client import McpConnection, StderrPump, Transport
from avibe.mcp.config import McpServer
from avibe.tools.sandbox import SANDBOX_HOME, SandboxPolicy, scrubbed_env

if TYPE_CHECKING:
    from mcp import StdioServerParameters

HTTP_TIMEOUT_S: Final = 30.0


def server_cwd(server: McpServer, workdir: Path) -> Path:
    """Where a stdio server runs: its `cwd` (relative to the working directory), else the working dir."""
    cwd = (workdir / server.cwd).resolve() if server.cwd else workdir.resolve()
    if not cwd.is_dir():
        raise ConfigError(f"MCP server {server.name}: its cwd {cwd} is not a folder")
    return cwd


def stdio_parameters(server: McpServer, sandbox: SandboxPolicy) -> StdioServerParameters:
    """The SDK's launch parameters: the command itself (full-access), or bwrap around it. Raises
    SandboxUnavailable (a ToolError, one line) where the sandbox cannot start."""
    from mcp import StdioServerParameters

    cwd = server_cwd(server, sandbox.workdir)
    env = {**scrubbed_env(os.environ, home=SANDBOX_HOME if sandbox.sandboxed else None), **dict(server.env)}
    # The SDK adds SHELL and LOGNAME from its own allow-list; nothing else of Avibe's environment.
    if not sandbox.sandboxed:
        return StdioServerParameters(command=server.command, args=list(server.args), env=env, cwd=cwd)
    sandbox.check()
    sandbox.make_folders()
    policy = dataclasses.replace(sandbox, network=server.network)
    options = policy.bwrap_args()  # they end with `--chdir WORKDIR`: the server's own cwd instead
    options = options[:-2] if options[-2:-1] == ["--chdir"] else options
    own = [arg for path in _program_files(server, policy) for arg in ("--ro-bind", str(path), str(path))]
    argv = [*options, *own, "--chdir", str(cwd), "--", server.command, *server.args]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)


def _program_files(server: McpServer, policy: SandboxPolicy) -> list[Path]:
    """The server's own program and script files that sit in /tmp (private in the sandbox, so they would
    be out of its sight): the user configured them, so they are shown read-only - a Python virtualenv as a
    whole. Never a path the sandbox hides (Avibe's home, record, sockets) nor one in the workdir (bound)."""
    found = shutil.which(server.command) or server.command
    named = [Path(found), *(Path(arg) for arg in server.args if arg.startswith("/"))]
    shown = []
    for path in named:
        if not path.is_absolute() or not path.exists() or not path.is_relative_to("/tmp"):
            continue
        venv = path.parent.parent
        path = venv if path.parent.name == "bin" and (venv / "pyvenv.cfg").is_file() else path
        if path.is_relative_to(policy.workdir) or any(
            path.is_relative_to(h) or h.is_relative_to(path) for h in policy.hidden
        ):
            continue
        shown.append(path)
    return list(dict.fromkeys(shown))


def transport_for(server: McpServer, sandbox: SandboxPolicy) -> Transport:
    """The transport the connection enters each time it starts the server."""
    if server.command:
        return lambda connection: _stdio(connection, sandbox)
    return lambda connection: _http(connection.server)


@asynccontextmanager
async def _stdio(connection: McpConnection, sandbox: SandboxPolicy) -> AsyncIterator[tuple[Any, Any]]:
    from mcp import stdio_client

    params = stdio_parameters(connection.server, sandbox)
    pump = connection.stderr = StderrPump(connection.server.name)
    try:
        async with stdio_client(params, errlog=pump.writer) as streams:
            pump.close_writer()
            yield streams
    finally:
        pump.close_writer()


@asynccontextmanager
async def _http(server: McpServer) -> AsyncIterator[tuple[Any, Any]]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=max(server.timeout_s, HTTP_TIMEOUT_S) + 5)
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), timeout=timeout) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams[0], streams[1]
