"""A published reference server, installed from PyPI as a dev dependency (`mcp-server-time`, from the
Model Context Protocol project's own servers): Avibe lists and calls its tools over stdio exactly as it
does the test's own demo server - in the sandbox the shell uses (SPEC L5)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from avibe.mcp.config import McpServer
from avibe.record.messages import ToolCall
from avibe.tools import ToolBox
from avibe.tools.sandbox import SandboxPolicy

pytestmark = pytest.mark.slow

TIME = McpServer("time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))


def test_the_reference_time_server_is_listed_and_called(start) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(TIME).tools())
    assert {"time.get_current_time", "time.convert_time"} <= set(box.names)
    result = box.dispatch(ToolCall("call_1", "time.get_current_time", {"timezone": "Asia/Tokyo"}))
    assert not result.is_error, result.output
    answer = json.loads(result.output)
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    wrong = box.dispatch(ToolCall("call_2", "time.get_current_time", {"timezone": "Mars/Olympus"}))
    assert wrong.is_error and "time.get_current_time reported an error" in wrong.output


def test_the_reference_server_runs_in_the_sandbox(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(TIME, sandbox=SandboxPolicy("workspace-write", tmp_path)).tools())
    result = box.dispatch(ToolCall("call_1", "time.convert_time", {
        "source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris",
    }))  # fmt: skip
    assert not result.is_error, result.output
    assert json.loads(result.output)["target"]["timezone"] == "Europe/Paris"
