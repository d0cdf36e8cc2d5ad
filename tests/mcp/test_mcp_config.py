"""MCP configuration (docs/mcp.md): `[mcp.servers.NAME]` checked value by value, a project's servers only
from a trusted project, the peers' files imported, `vibe mcp add/remove` editing the person's file and
nothing else in it, tool names the providers take, schemas the model can use, and approvals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from avibe.config import load_settings
from avibe.errors import ConfigError, ToolError
from avibe.mcp.config import NAME, McpServer, from_claude_json, from_codex_toml, parse_mcp_table
from avibe.mcp.edit import added, configured, removed
from avibe.mcp.tools import TOOL_NAME, spec_for
from avibe.providers.hosted import our_name, wire_name
from avibe.record.messages import ToolSpec
from avibe.tools.approval import ApprovalPolicy, ApprovalRequest


def test_a_server_table_is_checked_key_by_key() -> None:
    (server,) = parse_mcp_table(
        {"servers": {"tracker": {"command": "uvx", "args": ["t"], "env": {"T": "1"}, "network": "on"}}}, "f"
    )
    assert (server.command, server.args, dict(server.env), server.network) == (
        "uvx",
        ("t",),
        {"T": "1"},
        True,
    )
    bad = {
        "both": {"command": "x", "url": "http://h/mcp"},
        "neither": {},
        "args": {"command": "x", "args": "--flag"},
        "typo": {"command": "x", "comand": "y"},
        "url": {"url": "ftp://h/mcp"},
        "timeout": {"command": "x", "timeout_s": 0},
    }
    for name, table in bad.items():
        with pytest.raises(ConfigError, match=f"mcp.servers.{name}"):
            parse_mcp_table({"servers": {name: table}}, "f")
    with pytest.raises(ConfigError, match="server name"):
        parse_mcp_table({"servers": {"a__b": {"command": "x"}}}, "f")
    assert parse_mcp_table({"servers": {"off": {"command": "x", "enabled": False}}}, "f") == ()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_projects_servers_only_from_a_trusted_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _write(project / ".avibe" / "config.toml", '[mcp.servers.evil]\ncommand = "rm"\n')
    _write(project / ".mcp.json", json.dumps({"mcpServers": {"claude": {"command": "npx"}}}))
    user = _write(tmp_path / "user.toml", '[mcp.servers.mine]\ncommand = "mine"\n')
    env = {"AVIBE_HOME": str(tmp_path / "home")}
    untrusted = load_settings(env, project_dir=project, user_config=user)
    assert [s.name for s in untrusted.mcp_servers] == ["mine"]
    assert sum("MCP servers" in w and "trusted_projects" in w for w in untrusted.warnings) == 2
    _write(user, f'trusted_projects = ["{project}"]\n' + user.read_text())  # a top-level key: first
    trusted = load_settings(env, project_dir=project, user_config=user)
    assert [s.name for s in trusted.mcp_servers] == ["evil", "claude", "mine"]
    assert not any("MCP" in w for w in trusted.warnings)


def test_the_environment_cannot_add_servers(tmp_path: Path) -> None:
    env = {"AVIBE_HOME": str(tmp_path), "AVIBE_MCP": '{"servers": {"x": {"command": "x"}}}'}
    assert load_settings(env, project_dir=tmp_path, user_config=tmp_path / "none.toml").mcp_servers == ()


def test_claude_and_codex_files_import() -> None:
    gh_table = {"command": "npx", "args": ["-y", "gh"], "env": {"T": "1"}}
    docs_table = {"type": "http", "url": "https://d/mcp", "headers": {"A": "b"}}
    claude = {"mcpServers": {"gh": gh_table, "docs": docs_table}}
    gh, docs = from_claude_json(claude, ".mcp.json")
    assert (gh.target, docs.transport, dict(docs.headers)) == ("npx -y gh", "http", {"A": "b"})
    with pytest.raises(ConfigError, match="SSE"):
        from_claude_json({"mcpServers": {"old": {"type": "sse", "url": "https://o/sse"}}}, "f")
    codex = {"mcp_servers": {"cx": {"command": "cx", "tool_timeout_sec": 12, "startup_timeout_sec": 5},
                             "web": {"url": "https://w/mcp", "http_headers": {"K": "v"}}}}  # fmt: skip
    cx, web = from_codex_toml(codex, "config.toml")
    assert (cx.timeout_s, cx.startup_timeout_s, dict(web.headers)) == (12.0, 5.0, {"K": "v"})


def test_add_and_remove_keep_every_other_line() -> None:
    text = '# my settings\nmodel = "embedded"\n\n[rules]\ndeny = ["vendor/**"]  # theirs\n'
    server = McpServer("tracker", command="uvx", args=("tracker-mcp", 'a "quoted" arg'), env=(("T", "x"),))
    with_it = added(text, server, "config.toml")
    assert with_it.startswith(text)
    (back,) = configured(with_it, "config.toml")
    assert (back.args, dict(back.env)) == (server.args, {"T": "x"})
    with pytest.raises(ConfigError, match="already"):
        added(with_it, server, "config.toml")
    assert removed(with_it, "tracker", "config.toml").rstrip("\n") == text.rstrip("\n")
    with pytest.raises(ConfigError, match="no MCP server named other"):
        removed(with_it, "other", "config.toml")


@given(st.from_regex(NAME, fullmatch=True), st.from_regex(TOOL_NAME, fullmatch=True))
def test_hosted_tool_names_map_back(server: str, tool: str) -> None:
    name = f"{server}.{tool}"
    assert "." not in wire_name(name) and our_name(wire_name(name)) == name
    for own in ("read_file", "send_to_session", "record_query"):
        assert our_name(wire_name(own)) == own


def _tool(name: str, schema: object, description: str = "d") -> SimpleNamespace:
    return SimpleNamespace(name=name, input_schema=schema, description=description, title=None)


def test_a_tool_the_model_cannot_use_is_left_out_with_a_reason() -> None:
    ok = spec_for("s", _tool("get", {"type": "object", "properties": {"id": {"type": "string"}}}))
    assert isinstance(ok, ToolSpec) and ok.name == "s.get"
    cases = {
        "has space": {"type": "object"},
        "array": {"type": "array"},
        "invalid": {"type": "object", "properties": {"x": {"type": 5}}},
        "remote": {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
        "huge": {"type": "object", "description": "x" * 9000},
    }
    for name, schema in cases.items():
        left = spec_for("s", _tool(name, schema))
        assert isinstance(left, str) and "left out" in left


def test_ask_shows_server_tool_and_arguments_and_always_covers_the_tool() -> None:
    asked: list[ApprovalRequest] = []
    policy = ApprovalPolicy("ask", approver=lambda request: asked.append(request) or "always")  # type: ignore[func-returns-value]
    policy.check_call("tracker.create", "MCP server tracker: uvx tracker-mcp", '{"title": "x"}')
    policy.check_call("tracker.create", "MCP server tracker: uvx tracker-mcp", '{"title": "y"}')
    assert [(r.tool, r.action, r.subject, r.detail) for r in asked] == [
        ("tracker.create", "call", '{"title": "x"}', "MCP server tracker: uvx tracker-mcp")
    ]
    refusing = ApprovalPolicy("ask", approver=lambda request: "no")
    with pytest.raises(ToolError, match=r"did not approve: it will not call 'tracker\.create'"):
        refusing.check_call("tracker.create", "MCP server tracker", "{}")
    ApprovalPolicy("auto", approver=lambda request: pytest.fail("auto never asks")).check_call(
        "t.x", "s", "{}"
    )
