"""Claude Code sessions (`~/.claude/projects/<project>/<session>.jsonl`): lines of type "user" / "assistant"
with `message.content` a string or blocks; a user line of only tool_result blocks is tool output - but
for the words a person typed when rejecting a call, which Claude Code keeps inside its result: those are
the person's, recorded as a message tagged "rejection" (forms.rejection_reason)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from avibe.evals.importers.forms import (
    CLAUDE_FORMS,
    claude_command,
    form_of,
    rejection_reason,
    without_elements,
)
from avibe.evals.importers.reading import (
    AGENT_NAMES,
    Collector,
    Imported,
    as_flag,
    as_name,
    block_text,
    content_blocks,
    finish,
    json_lines,
    parse_time,
    shown,
)


def _claude_user_text(c: Collector, text: str, at: datetime) -> str:
    """The person's words in one user-role text, "" when it holds none: a form Claude Code writes itself
    is recorded as the agent's input or skipped (CLAUDE_FORMS); reminders beside the words are removed."""
    form, action = form_of(CLAUDE_FORMS, text)
    if action == "command":
        c.did(form, claude_command(text, form), at)
        return ""
    if action == "skip":
        return ""
    return without_elements(text)


def _claude_line(c: Collector, data: Mapping[str, Any], at: datetime) -> None:
    message = data.get("message")
    if not isinstance(message, Mapping):
        return
    content = content_blocks(c, message.get("content"), str(data["type"]))
    if data["type"] == "user":
        if isinstance(content, str):
            c.say(_claude_user_text(c, content, at), at)
            return
        for b in content:
            if b.get("type") == "tool_result":
                result = block_text(b.get("content"))
                c.output(str(b.get("tool_use_id", "")), result, as_flag(b.get("is_error")))
                c.rejected(rejection_reason(result), at)
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        words = [_claude_user_text(c, text, at) for text in texts]  # each block classified on its own
        said = "\n".join(w for w in words if w.strip())
        if said:
            c.say(said, at)
        else:
            c.settle()
        return
    if isinstance(content, str):
        c.text(at, content)
        return
    for b in content:
        if b.get("type") == "text":
            c.text(at, str(b.get("text", "")))
        elif b.get("type") == "tool_use":
            arguments = b.get("input") if isinstance(b.get("input"), dict) else {}
            c.call(at, str(b.get("id", "")), str(b.get("name", "tool")), dict(arguments or {}))


def parse_claude(path: Path, user: str) -> Imported:
    c, origin = Collector(user, AGENT_NAMES["claude"]), ""
    for number, data in json_lines(path):
        if (
            as_name(data.get("type")) not in {"user", "assistant"}
            or as_flag(data.get("isSidechain"))
            or as_flag(data.get("isMeta"))
        ):
            continue
        if as_flag(data.get("isCompactSummary")):  # Claude Code's own summary: not the person's words
            continue
        c.where = f"{shown(path)}:{number}"
        origin = origin or str(data.get("sessionId", ""))
        _claude_line(c, data, parse_time(data.get("timestamp")))
    return finish(c, path, "claude", origin)
