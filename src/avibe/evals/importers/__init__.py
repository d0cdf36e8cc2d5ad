"""Import real conversations: Claude Code, Codex, OpenCode, Craft Agents and Antigravity sessions
(docs/eval-format.md).

Both become a `Scenario` (type "imported", no ground truth) that every strategy can replay, with tool
output attached to its tool call, and can be recorded as an Avibe session: the person's messages through
`avibe.ingress.deliver` (so their source is right), the assistant's replies through `record_reply`.
Tool output is never recorded (A3); it stays in the replay conversation, saved as session state.

Who said it is decided by structure, never taken on trust (N7, T1): the file's own fields first (Claude
Code's `isMeta`, `isSidechain`, `isCompactSummary`, read as booleans even when written as strings;
Codex's `event_msg` user_message events, which name what the person typed). Where a file has no such
field, a user-role text is the person's words only when it is not one of the forms the agent writes into
the user role itself - a shell command run with `!` and its output, a slash command and its output, a
compaction summary, a system reminder (as whole elements), injected context. Those are skipped, or
recorded as an input of the imported agent (`agent` kind, its ref naming the form) when they say what
the person did (CLAUDE_FORMS, CODEX_FORMS; docs/eval-format.md has the table). A message merely opening
like an element (`<system-reminder>`, `<permissions`) is not dropped: it stays the person's.

Claude Code (`~/.claude/projects/<project>/<session>.jsonl`): lines of type "user" / "assistant" with
`message.content` a string or blocks (text, thinking, tool_use, tool_result); a user line that carries
only tool_result blocks is tool output, not the person's words; sidechain and meta lines are skipped.
Codex (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines {timestamp, type, payload}; messages and
tool calls come from `response_item` payloads (message, function_call, function_call_output,
custom_tool_call, custom_tool_call_output); `event_msg` lines repeat them for the UI and are skipped.
Craft Agents: `sessions/<id>/session.jsonl`, one line per message (importers/craft.py).
Antigravity: a trajectory's steps, one JSON line each (importers/antigravity.py).
OpenCode: `opencode export <id>` JSON ({info, messages: [{info, parts}]}), or a session file of its
storage (`storage/session/<project>/<id>.json`, messages in `storage/message/<id>/*.json`, their parts in
`storage/part/<message id>/*.json`); text parts (synthetic ones are OpenCode's, not the person's) and tool
parts whose `state` holds input and output (or error); reasoning, step and patch parts are skipped.

A file that cannot be imported raises `SessionImportError` (an `AvibeError`) with a one-line message
naming the file and line: unreadable, not UTF-8, not JSON, nested too deeply, a field of the wrong type,
an impossible OpenCode time. (Text the record cannot hold - NUL, lone surrogates - is refused when it is
recorded: `vibe import` rehearses the whole import first, so nothing is written.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from avibe.errors import SessionImportError as SessionImportError  # re-exported: the CLI catches it
from avibe.evals.importers.antigravity import is_antigravity_line, parse_antigravity
from avibe.evals.importers.claude import parse_claude
from avibe.evals.importers.codex import parse_codex
from avibe.evals.importers.craft import is_craft_line, parse_craft
from avibe.evals.importers.forms import CLAUDE_FORMS, CODEX_FORMS
from avibe.evals.importers.opencode import is_opencode, parse_opencode
from avibe.evals.importers.reading import AGENT_NAMES, FORMATS, Format, Imported, as_name, json_lines, shown
from avibe.evals.scenario import AssistantTurn, BackgroundInput, UserMessage, scenario_to_dict
from avibe.ports import RecordStore

__all__ = [
    "AGENT_NAMES",
    "CLAUDE_FORMS",
    "CODEX_FORMS",
    "FORMATS",
    "REPLAY_STATE_KEY",
    "Format",
    "Imported",
    "SessionImportError",
    "detect_format",
    "parse_antigravity",
    "parse_claude",
    "parse_codex",
    "parse_craft",
    "parse_opencode",
    "parse_session_file",
    "record_import",
]


REPLAY_STATE_KEY: Final = "eval.replay"


def detect_format(path: Path) -> Format:
    """Codex rollouts have {type, payload} lines; Claude Code lines have type user/assistant + message;
    OpenCode sessions are one JSON object (an export, or a session file of its storage)."""
    if is_opencode(path):
        return "opencode"
    for _, data in json_lines(path):
        if "payload" in data and as_name(data.get("type")) in {
            "session_meta",
            "response_item",
            "event_msg",
            "turn_context",
        }:
            return "codex"
        kind = as_name(data.get("type"))
        if kind in {"user", "assistant", "summary"} and ("message" in data or "summary" in data):
            return "claude"
        if is_craft_line(data):
            return "craft"
        if is_antigravity_line(data):
            return "antigravity"
    raise SessionImportError(
        f"{shown(path)}: neither a Claude Code session, a Codex rollout nor an OpenCode, Craft Agents or "
        "Antigravity session"
    )


def parse_session_file(path: Path, user: str, fmt: Format | None = None) -> Imported:
    parsers = {
        "claude": parse_claude,
        "codex": parse_codex,
        "opencode": parse_opencode,
        "craft": parse_craft,
        "antigravity": parse_antigravity,
    }
    return parsers[fmt or detect_format(path)](path, user)


def record_import(store: RecordStore, imported: Imported, title: str = "") -> str:
    """Record the conversation as a new Avibe session; returns its id. Inputs enter through ingress,
    replies as assistant entries; the replay conversation (with tool output) is kept as session state."""
    from avibe.ingress import deliver, record_reply
    from avibe.record.entries import Source

    agent = AGENT_NAMES[imported.format]
    session = store.create_session(title or imported.scenario.description)
    for event, at in zip(imported.scenario.events, imported.times, strict=True):
        if isinstance(event, UserMessage):
            # a rejection reason is the person's words; its ref says how they came (the memo reads the kind)
            deliver(store, session.id, Source("user", event.author, event.tag), event.text, at=at)
        elif isinstance(event, BackgroundInput):  # what the person did through the agent: not their words
            deliver(store, session.id, Source(event.source, event.name, event.ref), event.text, at=at)
        elif isinstance(event, AssistantTurn) and event.text:
            record_reply(store, session.id, event.text, agent=agent, at=at)
    store.save_state(session.id, REPLAY_STATE_KEY, scenario_to_dict(imported.scenario))
    return session.id
