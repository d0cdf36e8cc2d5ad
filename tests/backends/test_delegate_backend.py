"""A task Vibey delegates to Claude Code ("Vibey, or an external agent once the backends
issue lands"): Vibey on a scripted OpenAI-compatible model calls `delegate` with `agent: claude-code`;
the delegated session runs in a process of its own (`vibe serve --session S --exit-when-idle`) with the
real Claude Code from npm in it, on the scripted Anthropic provider; Claude Code gets the task under the
delegating session's tag (T3) and its final reply comes back to Vibey as an `agent` input whose ref is
the delegated session (T1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_provider import serve_provider
from test_backend_contract import _program_env

from avibe.host import render_input
from avibe.record.entries import EntryQuery
from avibe.record.state import AgentState
from avibe.store import open_store
from openai_chat import serve_chat
from serve_support import vibe

pytestmark = pytest.mark.slow
CLAUDE_SAYS = "The diff renames one function; nothing else changes."


def _vibey(body: dict[str, Any]) -> dict[str, Any]:
    said = json.dumps(body["messages"], ensure_ascii=False)
    if CLAUDE_SAYS in said:
        return {"role": "assistant", "content": "Claude Code reviewed it: one rename. Done."}
    if '"delegate"' in said and "Delegated to session" in said:
        return {"role": "assistant", "content": "Delegated; I will report when it answers."}
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    assert "delegate" in tools
    delegate = next(t for t in body["tools"] if t["function"]["name"] == "delegate")
    assert "claude-code" in delegate["function"]["parameters"]["properties"]["agent"]["enum"]
    arguments = json.dumps({"task": "Review the diff in HEAD.", "agent": "claude-code"})
    call = {"id": "call_d", "type": "function", "function": {"name": "delegate", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_vibey_delegates_a_task_to_claude_code_and_gets_its_answer_back(
    tmp_path: Path, agents_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with serve_provider() as provider, serve_chat() as chat:
        provider.answer = CLAUDE_SAYS
        chat.responder = _vibey
        env = _program_env("claude-code", tmp_path, provider, agents_path)
        env |= {"AVIBE_MODEL": "openai/gpt-4o", "OPENAI_API_KEY": "sk-avibe-test-dummy",
                "OPENAI_BASE_URL": chat.url, "AVIBE_SANDBOX": "workspace-write"}  # fmt: skip
        done = vibe(env, work, "run", "--json", "Get the diff in HEAD reviewed.", timeout=300)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    parent = next(e["session"] for e in events if e["kind"] == "turn_started")
    assert [e["reply"] for e in events if e["kind"] == "turn_ended"][-1] == (
        "Claude Code reviewed it: one rename. Done."
    ), done.stdout + done.stderr
    with open_store(f"sqlite:///{tmp_path / 'avibe' / 'avibe.db'}") as store:
        reports = [e for e in store.query(EntryQuery(parent)) if e.kind == "agent"]
        assert len(reports) == 1 and CLAUDE_SAYS in reports[0].text
        child = reports[0].source.ref
        assert store.load_state(child, AgentState.KEY) == {"name": "claude-code"}
        task, *rest = store.query(EntryQuery(child))
        assert (task.kind, task.source.ref, task.text) == ("agent", parent, "Review the diff in HEAD.")
        last = rest[-1]
        assert (last.kind, last.source.name, last.text) == ("assistant", "claude-code", CLAUDE_SAYS)
    assert provider.sent(render_input(task).text), "Claude Code got the task under the parent's tag (T3)"
