"""End to end through `vibe run` on a hosted model (a scripted OpenAI-compatible server on loopback): the
demo server's tools are offered as `demo__add` (no dot for the providers), a call of it runs in the real
server under the sandbox, its output comes back as a tool message, and nothing it says is a `user`
entry in the record."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from mcp_support import DEMO

from openai_chat import serve_chat
from sandbox_support import outside_tmp, require_sandbox
from serve_support import vibe, vibe_env

pytestmark = pytest.mark.slow


def test_vibe_run_calls_an_mcp_tool(tmp_path: Path) -> None:
    require_sandbox()
    workdir = outside_tmp("avibe-mcp-run-", tmp_path)
    try:
        _run(tmp_path, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(tmp_path: Path, workdir: Path) -> None:
    user = tmp_path / "xdg" / "avibe" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        f"[mcp.servers.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(DEMO))}]\n"
    )
    with serve_chat() as chat:
        chat.call("demo__add", a=20, b=22)
        chat.say("The sum is 42.")
        env = vibe_env(tmp_path / "home", chat) | {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
        done = vibe(env, workdir, "run", "--workdir", str(workdir), "Add 20 and 22 with the demo server.")
        offered = [tool["function"]["name"] for tool in chat.requests[0]["tools"]]
        assert "demo__add" in offered and "read_file" in offered
        assert chat.tool_outputs() == ["42"]
    assert "The sum is 42." in done.stdout
    entries = json.loads(vibe(env, workdir, "log", "--json").stdout)
    users = [entry for entry in entries if entry.get("kind") == "user"]
    assert [entry["text"] for entry in users] == ["Add 20 and 22 with the demo server."]
