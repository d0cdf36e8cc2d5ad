"""An MCP server's tools as Vibey's own (docs/mcp.md): each is `NAME.tool` with the server's JSON schema
(the embedded model's grammar is built from the same specs, avibe/providers/embedded.py), its result is
tool output - framed by the loop like any other tool's, never a `user` entry (SPEC T1, A3) - and the
person's approval mode applies (`ask`: the server, the tool and the arguments are shown first).

A tool whose name or schema the model cannot use is left out with one line saying why; images, audio and
resources in a result are described (kind, type, size, URI), not dropped silently.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from avibe.errors import ToolError
from avibe.mcp.client import CallOutcome, McpConnection
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import MAX_OUTPUT_CHARS, cut_text

# What every provider takes as a tool name once `.` is `__` (OpenAI and Anthropic: [A-Za-z0-9_-]{1,64}).
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_NAME: Final = 64
MAX_DESCRIPTION: Final = 1_000
MAX_SCHEMA_CHARS: Final = 8_000
_ARGUMENTS_SHOWN: Final = 4_000


def schema_problem(schema: object) -> str | None:
    """Why the model cannot use this input schema, or None: an object schema, valid JSON Schema, no
    reference outside itself (jsonschema would fetch it), small enough to send with every request."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return "its input schema is not a JSON object schema"
    try:
        Draft202012Validator.check_schema(schema)
        text = json.dumps(schema)
    except (SchemaError, TypeError, ValueError) as exc:
        return f"its input schema is not valid JSON Schema ({str(exc).splitlines()[0][:120]})"
    if re.search(r'"\$(?:ref|dynamicRef)":\s*"(?!#)', text):
        return "its input schema refers to a schema elsewhere"
    if len(text) > MAX_SCHEMA_CHARS:
        return f"its input schema is {len(text)} characters (at most {MAX_SCHEMA_CHARS})"
    return None


def spec_for(server: str, tool: Any) -> ToolSpec | str:
    """The ToolSpec the model is offered for an SDK `Tool`, or why it is left out (one line)."""
    name = f"{server}.{tool.name}"
    if not TOOL_NAME.fullmatch(tool.name) or len(name) > MAX_NAME:
        return (
            f"{name[:80]!r} is left out: a tool name must be letters, digits, '_' or '-', {MAX_NAME} in all"
        )
    problem = schema_problem(tool.input_schema)
    if problem is not None:
        return f"{name} is left out: {problem}"
    schema = {key: value for key, value in tool.input_schema.items() if key not in ("$schema", "title")}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    text = " ".join((tool.description or tool.title or tool.name).split())
    description = cut_text(text, "see the server's documentation", MAX_DESCRIPTION)
    return ToolSpec(name, f"{description} (MCP server {server})", schema)


def render(outcome: CallOutcome, name: str, timeout_s: float) -> ToolResult:
    """A call's outcome as tool output: what the server returned, or one line saying why not."""
    if outcome.end == "timeout":
        why = f"no answer within {timeout_s:g} s; the call was cancelled. The server may be slow or stuck"
        return ToolResult(f"{name}: {why}: try once more later, or go on without it.", is_error=True)
    if outcome.end == "stopped":
        why = f"stopped by the user (Ctrl-C) after {outcome.seconds:.1f} s; the server was told to cancel"
        return ToolResult(f"{name}: {why} the call, which may have done part of its work.", is_error=True)
    if outcome.end == "error":
        return ToolResult(f"{name}: the server answered with an error: {outcome.detail}", is_error=True)
    if outcome.end == "down":
        return ToolResult(f"{name}: the MCP server is not available: {outcome.detail}", is_error=True)
    result = outcome.result
    parts = [_part(block) for block in getattr(result, "content", None) or ()]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(parts) if parts else "(no output)"
    if getattr(result, "is_error", False):
        text = f"{name} reported an error: {text}"  # one line with its words: the scene's failing call (S5)
    shown = cut_text(text, "the server's output was longer", MAX_OUTPUT_CHARS, keep_tail=True)
    return ToolResult(shown, is_error=bool(getattr(result, "is_error", False)))


def _size(data: str | None) -> str:
    text = (data or "").strip()
    return f"{len(text) * 3 // 4 - text[-2:].count('='):,} bytes"  # base64: 4 characters for 3 bytes


def _part(block: Any) -> str:
    """One content block: text as it is; anything else described in one line."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_size(block.data)} - not shown here; ask the person to look]"
    if kind == "resource_link":
        mime = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}]"
    if kind == "resource":
        resource = block.resource
        mime = f", {resource.mime_type}" if resource.mime_type else ""
        if getattr(resource, "text", None) is not None:
            return f"[resource <{resource.uri}>{mime}]\n{resource.text}"
        size = _size(getattr(resource, "blob", ""))
        return f"[resource <{resource.uri}>{mime}: {size} of binary data, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


class McpTool:
    """One MCP tool, dispatched by the ToolBox like the built-in ones (arguments checked first)."""

    def __init__(
        self,
        connection: McpConnection,
        tool: str,
        spec: ToolSpec,
        approval: ApprovalPolicy | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._connection, self._tool, self._spec = connection, tool, spec
        self._approval, self._stop = approval, stop

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        server = self._connection.server
        if self._approval is not None:
            shown = json.dumps(dict(arguments), ensure_ascii=False, indent=1)
            try:
                self._approval.check_call(
                    self._spec.name,
                    f"MCP server {server.name}: {server.target}",
                    cut_text(shown, "", _ARGUMENTS_SHOWN),
                )
            except ToolError as exc:
                return ToolResult(str(exc), is_error=True)
        outcome = self._connection.call(self._tool, dict(arguments), self._stop)
        return render(outcome, self._spec.name, server.timeout_s)
