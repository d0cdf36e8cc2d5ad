"""A session's MCP servers: started together when the session opens (each within its startup timeout),
their tools offered to Vibey for the session, their state for `/mcp` (`vibe mcp list --session S` in the
process that hosts S reads the live servers registered here), stopped when the session closes.

A server that does not start, or a tool it lists that the model cannot use, is one line to the person
(`notify`) and in the log; the session goes on without it. Its tools are fixed for the session, as the
built-in ones are (the room's budget counts them once, avibe/agent/view.py): a `tools/list_changed`
is shown in `/mcp`, and a tool it added is offered from the next session on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from avibe.mcp.client import EventLoop, McpConnection
from avibe.mcp.config import McpServer
from avibe.mcp.launch import transport_for
from avibe.mcp.tools import McpTool, spec_for
from avibe.ports import Tool
from avibe.record.messages import ToolSpec
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.sandbox import SandboxPolicy

_LIVE: Final[dict[str, McpServers]] = {}  # session id -> its servers, in the process that hosts it
_LIVE_LOCK: Final = threading.Lock()


def live_servers(session_id: str) -> McpServers | None:
    with _LIVE_LOCK:
        return _LIVE.get(session_id)


def start_servers(
    servers: Sequence[McpServer],
    sandbox: SandboxPolicy,
    notify: Callable[[str], None],
    session_id: str,
    count: Callable[[str], int] | None = None,
) -> McpServers:
    """The session's servers, started (each that does not start is one line to `notify`) and registered
    for `/mcp` in this process; `count`: the session model's token count, for what the tools cost."""
    found = McpServers(servers, sandbox, notify)
    found.count = count
    found.start()
    found.register(session_id)
    return found


class McpServers:
    """The configured servers of one session over one event loop."""

    def __init__(
        self,
        servers: Sequence[McpServer],
        sandbox: SandboxPolicy,
        notify: Callable[[str], None] = lambda line: None,
    ) -> None:
        self._loop = EventLoop() if servers else None  # no thread for a session without servers
        self.connections = [
            McpConnection(s, loop, transport_for(s, sandbox)) for s in servers if (loop := self._loop)
        ]
        self._notify = notify
        self.left_out: dict[str, list[str]] = {}  # server -> one line per tool the model cannot use
        self.session_id = ""
        self.count: Callable[[str], int] | None = None

    def start(self) -> None:
        """Start every server at once; each that does not start is one line to the person."""
        if not self.connections:
            return
        with ThreadPoolExecutor(max_workers=min(8, len(self.connections))) as pool:
            started = list(pool.map(McpConnection.start, self.connections))
        for connection, ok in zip(self.connections, started, strict=True):
            if not ok:
                self._notify(f"MCP server {connection.server.name} is not available: {connection.reason}")

    def tools(
        self, approval: ApprovalPolicy | None = None, stop: threading.Event | None = None
    ) -> list[Tool]:
        """The tools of every server that started, as `NAME.tool`; each left out is one line."""
        found: list[Tool] = []
        for connection in self.connections:
            name, lines = connection.server.name, []
            for tool in connection.tools:
                spec = spec_for(name, tool)
                if isinstance(spec, ToolSpec):
                    found.append(McpTool(connection, tool.name, spec, approval, stop))
                else:
                    lines.append(spec)
            self.left_out[name] = lines
            for line in lines:
                self._notify(f"MCP server {name}: {line}")
        return found

    def register(self, session_id: str) -> None:
        self.session_id = session_id
        with _LIVE_LOCK:
            _LIVE[session_id] = self

    def close(self) -> None:
        with _LIVE_LOCK:
            if _LIVE.get(self.session_id) is self:
                del _LIVE[self.session_id]
        for connection in self.connections:
            connection.close()
        if self._loop is not None:
            self._loop.close()

    def status(self) -> list[str]:
        """For `/mcp`: each server, its state and tools, and what their schemas cost in tokens - counted
        as the room's budget counts every tool (avibe/agent/view.py `tool_tokens`)."""
        lines, count = [], self.count
        for connection in self.connections:
            server = connection.server
            state = connection.state + (f" ({connection.reason})" if connection.reason else "")
            lines.append(f"{server.name}  {server.transport}  {state}  {server.target}")
            specs = [spec_for(server.name, tool) for tool in connection.tools]
            usable = [s for s in specs if isinstance(s, ToolSpec)]
            if count is not None and usable:
                cost = sum(count(f"{s.name} {s.description} {s.parameters}") for s in usable)
                lines.append(f"  {len(usable)} tools, {cost:,} tokens of the context each request")
            lines += [f"  {s.name}: {s.description[:100]}" for s in usable]
            lines += [f"  {line}" for line in self.left_out.get(server.name, ())]
            if connection.junk:
                lines.append(f"  printed {connection.junk} line(s) on stdout that were not MCP (skipped)")
            if connection.list_changed:
                lines.append(
                    "  its tools changed since the session started: the new list is offered from the next "
                    "session"
                )
        return lines
