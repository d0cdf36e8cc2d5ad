"""MCP tools against a real server written with the SDK (tests/mcp/demo_server.py): listed as
`demo.tool` with their schemas, called, a tool error, an image described, a crash mid-call (restarted at
most `restarts` times), a hang past the timeout, junk on stdout, the stop switch (Ctrl-C), a server that
does not start; and the same server over streamable HTTP."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from mcp_support import demo

from avibe.mcp.config import McpServer
from avibe.record.messages import ToolCall
from avibe.tools import ToolBox

pytestmark = pytest.mark.slow


def call(box: ToolBox, name: str, **arguments: object):  # type: ignore[no-untyped-def]
    return box.dispatch(ToolCall("call_1", name, dict(arguments)))


def test_tools_are_listed_as_server_dot_tool_with_their_schema(start) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(demo()).tools())
    assert {"demo.add", "demo.fail", "demo.crash", "demo.hang", "demo.picture"} <= set(box.names)
    spec = next(s for s in box.specs if s.name == "demo.add")
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.parameters["required"] == ["a", "b"]
    assert "Add two whole numbers" in spec.description and "MCP server demo" in spec.description


def test_a_call_returns_the_output_and_bad_arguments_never_reach_the_server(start) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(demo()).tools())
    result = call(box, "demo.add", a=2, b="3")  # a quoted number is read as the schema says
    assert (result.output, result.is_error) == ("5", False)
    refused = call(box, "demo.add", a=2)
    assert refused.is_error and "missing required argument(s) b" in refused.output


def test_a_tool_error_is_an_error_result_with_the_servers_words(start) -> None:  # type: ignore[no-untyped-def]
    result = call(ToolBox(start(demo()).tools()), "demo.fail", reason="no disk")
    assert result.is_error
    assert "demo.fail reported an error" in result.output and "cannot do that: no disk" in result.output


def test_a_failing_mcp_call_is_the_scenes_last_failing_call(start) -> None:  # type: ignore[no-untyped-def]
    """The checkpoint's scene keeps an MCP call's failure like any tool's (S5): its name, arguments and the
    server's own error line, from what the harness saw, whatever the model writes."""
    from avibe.agent.live import harness_facts, track_tool
    from avibe.agent.state import LiveState
    from avibe.checkpoint.facts import facts_text

    failing = ToolCall("call_1", "demo.fail", {"reason": "no disk"})
    result = ToolBox(start(demo()).tools()).dispatch(failing)
    state = track_tool(LiveState(), failing, result)
    text = "\n".join(facts_text(harness_facts(state), 8_192).values())
    assert 'last failing call: demo.fail `{"reason": "no disk"}`' in text, text
    assert "cannot do that: no disk" in text


def test_an_image_is_described_not_dropped(start) -> None:  # type: ignore[no-untyped-def]
    result = call(ToolBox(start(demo()).tools()), "demo.picture")
    assert result.output.startswith("[image: image/png, 100 bytes") and not result.is_error


def test_a_crash_mid_call_is_one_line_and_the_server_restarts_at_most_n_times(start) -> None:  # type: ignore[no-untyped-def]
    servers = start(demo(restarts=1))
    box = ToolBox(servers.tools())
    crashed = call(box, "demo.crash")
    assert crashed.is_error and len(crashed.output.splitlines()) == 1
    assert "stopped during the call" in crashed.output and "crashing now" in crashed.output  # its stderr
    assert call(box, "demo.add", a=1, b=1).output == "2"  # restarted (1 of 1)
    assert call(box, "demo.crash").is_error
    gone = call(box, "demo.add", a=1, b=1)
    assert gone.is_error and "not available" in gone.output  # no restart left: the session goes on
    assert servers.connections[0].starts == 2


def test_a_call_past_the_timeout_is_cancelled_and_the_server_goes_on(start) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(demo(timeout_s=1)).tools())
    hung = call(box, "demo.hang", seconds=60)
    assert hung.is_error and "no answer within 1 s; the call was cancelled" in hung.output
    assert call(box, "demo.add", a=3, b=4).output == "7"


def test_junk_on_stdout_is_skipped_and_counted(start) -> None:  # type: ignore[no-untyped-def]
    servers = start(demo("--junk"))
    box = ToolBox(servers.tools())
    assert call(box, "demo.add", a=1, b=2).output == "3"
    assert servers.connections[0].junk >= 1  # the banner before it spoke MCP
    assert any("not MCP" in line for line in servers.status())


def test_the_stop_switch_cancels_a_running_call(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stop = threading.Event()
    box = ToolBox(start(demo(timeout_s=600)).tools(stop=stop))

    def press_ctrl_c() -> None:  # once the call is running in the server
        while not (tmp_path / "hang-started").exists():
            threading.Event().wait(0.05)
        stop.set()

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    stopped = call(box, "demo.hang", seconds=600)
    assert stopped.is_error and "stopped by the user (Ctrl-C)" in stopped.output


def test_a_server_that_does_not_start_is_one_line_and_the_session_goes_on(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines: list[str] = []
    missing = McpServer("gone", command=str(tmp_path / "no-such-program"), restarts=0)
    silent = McpServer("silent", command="sleep", args=("600",), startup_timeout_s=1, restarts=0)
    servers = start(missing, silent, demo(), notify=lines.append)
    assert [line.split(" is not available")[0] for line in lines] == ["MCP server gone", "MCP server silent"]
    assert "did not start within 1 s" in lines[1]
    box = ToolBox(servers.tools())
    assert call(box, "demo.add", a=1, b=1).output == "2"
    assert not any(name.startswith(("gone.", "silent.")) for name in box.names)


def test_streamable_http(start, http_demo: str) -> None:  # type: ignore[no-untyped-def]
    box = ToolBox(start(McpServer("web", url=http_demo)).tools())
    assert "web.add" in box.names
    assert call(box, "web.add", a=20, b=22).output == "42"
    assert "cannot do that: x" in call(box, "web.fail", reason="x").output
