"""Real MCP servers for the MCP tests: tests/mcp/demo_server.py, written with the SDK, started over stdio
by the code under test or over streamable HTTP by the `http_demo` fixture."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from mcp_support import DEMO

from avibe.mcp.config import McpServer
from avibe.mcp.servers import McpServers
from avibe.tools.sandbox import SandboxPolicy
from serve_support import free_port


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., McpServers]]:
    """Start servers as a session does; every one is stopped after the test."""
    opened: list[McpServers] = []

    def started(*servers: McpServer, sandbox: SandboxPolicy | None = None, notify=None) -> McpServers:  # type: ignore[no-untyped-def]
        found = McpServers(
            servers, sandbox or SandboxPolicy("full-access", tmp_path), notify or (lambda line: None)
        )
        opened.append(found)
        found.start()
        return found

    yield started
    for found in opened:
        found.close()


@pytest.fixture
def http_demo(tmp_path: Path) -> Iterator[str]:
    """The demo server on streamable HTTP (loopback); its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), "--http", str(port)], cwd=tmp_path, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(600):  # up to a minute on busy cores: waits for a state, not a time
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    pytest.fail("the HTTP demo server exited")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
