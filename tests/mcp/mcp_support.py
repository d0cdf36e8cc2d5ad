"""The demo MCP server as a test names it (a module of its own: `from conftest import` is ambiguous when
several test folders run in one pytest call)."""

from __future__ import annotations

import sys
from pathlib import Path

from avibe.mcp.config import McpServer

DEMO = Path(__file__).with_name("demo_server.py")


def demo(*flags: str, **options: object) -> McpServer:
    """The demo server over stdio, run by this Python (it has the SDK)."""
    return McpServer("demo", command=sys.executable, args=(str(DEMO), *flags), **options)  # type: ignore[arg-type]
