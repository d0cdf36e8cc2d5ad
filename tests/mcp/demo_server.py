"""A small MCP server written with the SDK's MCPServer (FastMCP in the SDK's first major version), started
by the tests over stdio or streamable HTTP: `python demo_server.py [--junk] [--http PORT]`."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("demo")
JUNK = "--junk" in sys.argv


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    if JUNK:
        print("progress: adding (not MCP)", flush=True)  # junk on stdout in the middle of a call
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"cannot do that: {reason}")


@server.tool()
def crash() -> str:
    """Exits the server in the middle of the call."""
    print("crashing now", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def hang(seconds: float) -> str:
    """Sleeps, then answers."""
    Path("hang-started").write_text(str(os.getpid()))  # the test knows the call arrived
    time.sleep(seconds)
    return "woke up"


@server.tool()
def picture() -> Image:
    """Returns a small PNG image."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"0" * 92, format="png")


@server.tool()
def write(path: str, text: str) -> str:
    """Writes text into a file at path; says what happened."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        return f"not written: {exc.strerror}"
    return "written"


@server.tool()
def connect(host: str, port: int) -> str:
    """Opens a TCP connection; says what happened."""
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as exc:
        return f"no connection: {exc}"
    return "connected"


@server.tool()
def environment(name: str) -> str:
    """The value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


if __name__ == "__main__":
    print("demo server starting", file=sys.stderr, flush=True)
    if JUNK:
        print("Welcome to the demo server! (not MCP)", flush=True)
    if "--http" in sys.argv:
        server.run("streamable-http", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run()
