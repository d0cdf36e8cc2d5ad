"""A stdio MCP server in the sandboxed modes runs under the shell's bubblewrap policy: it cannot write
outside the working directory nor reach the network (loopback included) unless its own `network = "on"`,
its environment is the allow-list plus its configured `env`, and its stderr goes to Avibe's log."""

from __future__ import annotations

import logging
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import demo

from avibe.record.messages import ToolCall
from avibe.tools import ToolBox
from avibe.tools.sandbox import SandboxPolicy
from sandbox_support import outside_tmp, require_sandbox

pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    require_sandbox()
    folder = outside_tmp("avibe-mcp-work-", tmp_path)  # a sandboxed server has a private /tmp
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def call(box: ToolBox, tool: str, **arguments: object) -> str:
    result = box.dispatch(ToolCall("call_1", tool, dict(arguments)))
    assert not result.is_error, result.output
    return result.output


def test_a_sandboxed_server_writes_only_in_the_workdir(start, workdir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = outside_tmp("avibe-mcp-outside-", tmp_path)
    try:
        box = ToolBox(start(demo(), sandbox=SandboxPolicy("workspace-write", workdir)).tools())
        assert call(box, "demo.write", path=str(workdir / "inside.txt"), text="ok") == "written"
        assert (workdir / "inside.txt").read_text() == "ok"
        refused = call(box, "demo.write", path=str(outside / "escaped.txt"), text="x")
        assert refused == "not written: Read-only file system"
        assert not (outside / "escaped.txt").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_no_network_by_default_and_its_own_opt_in(start, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as listener:  # something Avibe's machine serves on loopback
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        sandbox = SandboxPolicy("workspace-write", workdir)
        closed = ToolBox(start(demo(), sandbox=sandbox).tools())
        assert call(closed, "demo.connect", host="127.0.0.1", port=port).startswith("no connection")
        opened = ToolBox(start(demo(network=True), sandbox=sandbox).tools())
        assert call(opened, "demo.connect", host="127.0.0.1", port=port) == "connected"


def test_environment_is_the_allow_list_plus_its_env_and_stderr_goes_to_the_log(
    start, workdir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AVIBE_DATABASE_URL", "postgresql://me:secret@db/avibe")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    caplog.set_level(logging.INFO, logger="avibe.mcp.server")
    server = demo(env=(("TRACKER_TOKEN", "t-123"),))
    box = ToolBox(start(server, sandbox=SandboxPolicy("workspace-write", workdir)).tools())
    assert call(box, "demo.environment", name="AVIBE_DATABASE_URL") == "(unset)"
    assert call(box, "demo.environment", name="OPENAI_API_KEY") == "(unset)"
    assert call(box, "demo.environment", name="TRACKER_TOKEN") == "t-123"
    assert call(box, "demo.environment", name="HOME") == "/tmp/home"
    assert any(
        r.name == "avibe.mcp.server" and "demo server starting" in r.getMessage() for r in caplog.records
    )
