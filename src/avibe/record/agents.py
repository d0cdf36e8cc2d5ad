"""Who can work in a session: Vibey, and the external agents Avibe runs as they are (L5, T3). The one
list the CLI's options and help, the chat's /agent, the backends and the importer read: a new backend
is one line here and its adapter in `avibe.backends`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from avibe.record.state import VIBEY as VIBEY  # the name the record keeps for Vibey (AgentState)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str  # as typed (`--agent NAME`, `/agent NAME`) and as the record names who wrote a reply
    title: str  # as people write it
    external: bool  # runs as it is: its own model, context and permissions (L5)
    import_format: str = ""  # `vibe import --format` name of its session files ("": none)
    session_files: str = ""  # which of its files `vibe import` reads, for the help
    hosted: bool = True  # Avibe can host it (False: an agent whose sessions can only be imported)


AGENTS: Final[tuple[AgentInfo, ...]] = (
    AgentInfo(VIBEY, "Vibey", external=False),
    AgentInfo("claude-code", "Claude Code", True, "claude", "<session>.jsonl"),
    AgentInfo("codex", "Codex", True, "codex", "rollout-*.jsonl"),
    AgentInfo(
        "opencode",
        "OpenCode",
        True,
        "opencode",
        "session (`opencode export` JSON, or storage/session/<project>/<id>.json)",
    ),
    # agents whose sessions `vibe import` reads but Avibe does not host
    AgentInfo("craft-agent", "Craft Agents", True, "craft", "sessions/<id>/session.jsonl", hosted=False),
    AgentInfo("antigravity", "Antigravity", True, "antigravity", "trajectory", hosted=False),
)


def agent_names() -> tuple[str, ...]:
    return tuple(agent.name for agent in AGENTS)


def external_agents() -> tuple[AgentInfo, ...]:
    """The agents other than Vibey that Avibe hosts as they are (`avibe.backends` has one adapter each)."""
    return tuple(agent for agent in AGENTS if agent.external and agent.hosted)


def is_external(name: str) -> bool:
    """An agent other than Vibey (a name the registry lacks counts: the backends refuse it by name)."""
    return name != VIBEY


def listed(words: tuple[str, ...], last: str = "or") -> str:
    """("a", "b", "c") -> "a, b or c" (the help texts' lists)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def external_titles(last: str = "or") -> str:
    """ "Claude Code, Codex or OpenCode" - for help texts."""
    return listed(tuple(agent.title for agent in external_agents()), last)


def external_names(last: str = "or") -> str:
    """ "claude-code, codex or opencode" - for help texts."""
    return listed(tuple(agent.name for agent in external_agents()), last)


def import_files(formats: Sequence[str]) -> str:
    """ "Claude Code's <session>.jsonl, Codex's rollout-*.jsonl or ..." - `vibe import`'s help, for the
    formats it reads."""
    return listed(tuple(f"{a.title}'s {a.session_files}" for a in AGENTS if a.import_format in formats))


def agent_of_format(fmt: str) -> str:
    """The agent whose session files `vibe import --format FMT` reads; KeyError for an unknown format."""
    for agent in AGENTS:
        if agent.import_format and agent.import_format == fmt:
            return agent.name
    raise KeyError(fmt)
