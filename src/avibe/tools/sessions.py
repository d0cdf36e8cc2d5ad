"""Tools that reach other sessions: `send_to_session` posts a message into another live
session, `delegate` starts a task in a new session whose final reply comes back as an input.

Both arrive as `agent` inputs whose ref is the sending session (T1): the harness, not the text, says
where they came from, so a delegated run's "the user asked ..." stays attributed to that session. The
actual delivery is passed in by the edge (adapters never call up into ingress, DESIGN layers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from avibe.errors import AvibeError, ToolError, UnknownSession
from avibe.ports import Tool, ToolResult
from avibe.record.agents import VIBEY
from avibe.record.entries import Entry
from avibe.record.messages import ToolSpec
from avibe.tools.base import BaseTool, schema

MAX_MESSAGE_CHARS: Final = 20_000


def _text(args: dict[str, Any], key: str, tool: str) -> str:
    value = str(args[key])
    if not value.strip():
        raise ToolError(f"{tool}: {key} is empty")
    if len(value) > MAX_MESSAGE_CHARS:
        raise ToolError(f"{tool}: {key} is {len(value):,} characters; at most {MAX_MESSAGE_CHARS:,} fit")
    return value


class SendToSession(BaseTool):
    def __init__(self, send: Callable[[str, str], Entry]) -> None:
        self._send = send
        self._spec = ToolSpec(
            name="send_to_session",
            description=(
                # No example id here: the 1.5B sent the demo's news to the example's id, again and again
                # . Only an id the conversation holds can be right.
                "Post a message into another Avibe session, by an id that an input or the user gave you "
                "(never a guessed one). It arrives there tagged as coming from this session, never as the "
                "user's words."
            ),
            parameters=schema(
                {"session": ("string", "the other session's id"), "text": ("string", "the message")},
                ["session", "text"],
            ),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        target, text = _text(args, "session", "send_to_session"), _text(args, "text", "send_to_session")
        try:
            entry = self._send(target.strip(), text)
        except UnknownSession as exc:
            raise ToolError(no_such_session(target.strip())) from exc
        except AvibeError as exc:
            raise ToolError(f"send_to_session: {exc}") from exc
        return ToolResult(f"Sent to session {entry.session} as its message #{entry.seq}.")


def no_such_session(target: str) -> str:
    """The error for an id no session has. The demo's 1.5B took the name of a watch ("deploy-bot", from a
    `[Harness: watch "deploy-bot" ...]` header) for a session and sent to it turn after turn, so the
    error says what such a name is and what to do instead, not only that the id is unknown."""
    return (
        f"send_to_session: there is no session {target!r}; nothing was sent. Only an id that the user or "
        "an input gave you as a session's id can receive a message. The name in a [Harness: watch ...] "
        "header is a watch that Avibe runs for you: it shows you a file's changes and reads nothing. Do "
        "not send this again; go on with the user's request."
    )


class Delegate(BaseTool):
    def __init__(self, delegate: Callable[[str, str], str], workers: Sequence[str] = (VIBEY,)) -> None:
        if not workers:
            raise ValueError("delegate needs at least one worker")
        self._delegate, self._workers = delegate, tuple(workers)
        parameters = schema({"task": ("string", "the whole task, self-contained")}, ["task"])
        if len(self._workers) > 1:  # external agents installed: the model may pick one
            parameters["properties"]["agent"] = {
                "type": "string",
                "enum": list(self._workers),
                "description": f"who works on it (default {self._workers[0]}): " + ", ".join(self._workers),
            }
        self._spec = ToolSpec(
            name="delegate",
            description=(
                "Hand a self-contained task to a new agent session that works on it in the background. "
                "Its final reply comes back to you later as an input tagged with that session's id; "
                "until then the scene lists it under Waiting for. Say everything it needs in the task."
            ),
            parameters=parameters,
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        task = _text(args, "task", "delegate")
        worker = str(args.get("agent") or self._workers[0])  # the schema's enum: only the agents found here
        try:
            child = self._delegate(task, worker)
        except AvibeError as exc:
            raise ToolError(f"delegate: {exc}") from exc
        return ToolResult(
            f"Delegated to session {child}. Its final reply will arrive as an input tagged "
            f"'agent session' with ref {child}; carry on meanwhile."
        )


def session_tools(
    send: Callable[[str, str], Entry], delegate: Callable[[str, str], str], workers: Sequence[str] = (VIBEY,)
) -> list[Tool]:
    """`workers`: who a delegated task may go to - Vibey and the external agents installed here; with none,
    no `delegate` tool is offered."""
    return [SendToSession(send), *([Delegate(delegate, workers)] if workers else [])]
