"""The edges (`cli`, `tui`, `web`) talk to the session host, never to the agent's own object: the meter's
figures, /compaction and the tool hook go through `avibe.host.agent.ContextControls`, what a session
waits on through `HostedSession.outstanding`, and the agent itself only through the `Agent` protocol
(`name`, `cursor`, `run_turn`). `compose` builds Vibey and is left out: it is where the agent is made.

The check reads the source (AST): an edge that reads `.vibey`, calls anything but the protocol on the
host's `.agent`, imports Vibey's class, or assigns one of Vibey's fields on another object (the chat
used to swap `vibey.run_tool` at run time) fails it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from avibe.agent.loop import Vibey

SRC = Path(__file__).resolve().parents[1] / "src" / "avibe"
EDGE_DIRS = ("cli", "tui", "web")
AGENT_PROTOCOL = frozenset({"name", "cursor", "run_turn"})  # avibe.host.agent.Agent
VIBEY_FIELDS = frozenset(f.name for f in dataclasses.fields(Vibey))


def _named(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def reaches(source: str) -> list[str]:
    """Each place in `source` where an edge reaches into the agent, as 'line N: what'."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr == "vibey":
            found.append(f"line {line}: reads .vibey (use HostedSession.context / .outstanding)")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "agent"
            and _named(node.value.value) == "host"  # the host's agent (`live.host.agent`)
            and node.attr not in AGENT_PROTOCOL
        ):
            found.append(f"line {line}: .agent.{node.attr} is not the Agent protocol")
        if isinstance(node, ast.ImportFrom) and node.module == "avibe.agent.loop":
            found.append(f"line {line}: imports avibe.agent.loop (Vibey's class)")
        if isinstance(node, ast.Import) and any(a.name == "avibe.agent.loop" for a in node.names):
            found.append(f"line {line}: imports avibe.agent.loop (Vibey's class)")
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr in VIBEY_FIELDS
                and _named(target.value) != "self"
            ):
                found.append(f"line {line}: sets {target.attr} on another object (add a tool hook)")
    return found


def test_no_edge_reaches_into_the_agent() -> None:
    problems = [
        f"{path.relative_to(SRC.parent)} {problem}"
        for edge in EDGE_DIRS
        for path in sorted((SRC / edge).rglob("*.py"))
        for problem in reaches(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_the_chat_and_serve_used_to_do() -> None:
    old = """
from avibe.agent.loop import Vibey
def wrap(live, shown):
    vibey = live.vibey
    limits = vibey.limits
    vibey.run_tool = shown
def busy(live):
    return bool(live.vibey.waiting_for())
def peek(live):
    return live.host.agent.load_state()
"""
    found = reaches(old)
    assert any("imports avibe.agent.loop" in f for f in found)
    assert sum(".vibey" in f for f in found) == 2
    assert any("sets run_tool" in f for f in found)
    assert any(".agent.load_state" in f for f in found)
    assert reaches("def ok(live):\n    return live.host.agent.cursor(), live.context.meter()\n") == []
