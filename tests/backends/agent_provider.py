"""A scripted model provider on loopback that stands in for Anthropic, OpenAI and any OpenAI-compatible
server, so the real Claude Code, Codex and OpenCode can run in tests: the Anthropic Messages API
(`/v1/messages`, for ANTHROPIC_BASE_URL), the OpenAI Responses API (`/v1/responses`, Codex's custom
provider) and Chat Completions (`/v1/chat/completions`, OpenCode's openai-compatible provider) - each
streamed the way the provider streams it. Every request body is kept; each is answered with `answer`
(or, once, a tool call from `tool_calls`); `hold` makes requests wait (a hanging provider)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class Provider:
    url: str = ""
    answer: str = "scripted answer"
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)  # each answers one request that offers tools
    hold: threading.Event | None = None  # set: requests wait until it is set (or the test ends)
    arrived: threading.Event = field(default_factory=threading.Event)
    status: int = 200  # e.g. 401: every request is refused
    lock: threading.Lock = field(default_factory=threading.Lock)

    def strings(self) -> list[str]:
        """Every string in every request body (the texts the program sent, decoded from JSON)."""
        found: list[str] = []
        for body in list(self.bodies):
            _collect(body, found)
        return found

    def sent(self, text: str) -> bool:
        return any(text in s for s in self.strings())

    def take_tool_call(self, body: dict[str, Any]) -> ToolCall | None:
        with self.lock:
            if self.tool_calls and body.get("tools"):
                return self.tool_calls.pop(0)
        return None


def _collect(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)


def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def anthropic_events(text: str, call: ToolCall | None) -> list[bytes]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events = [_sse("message_start", {"type": "message_start", "message": message})]
    if call is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": text}
    else:
        block = {"type": "tool_use", "id": "toolu_1", "name": call.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)}
    events += [
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]
    stop = "end_turn" if call is None else "tool_use"
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def responses_events(text: str, call: ToolCall | None) -> list[bytes]:
    if call is None:
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    else:
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    return [
        _sse("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
        _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        _sse(
            "response.completed", {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}}
        ),
    ]


def chat_events(text: str, call: ToolCall | None) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(
            None,
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "scripted",
                "choices": [choice],
            },
        )

    if call is None:
        body = [chunk({"role": "assistant", "content": text})]
        finish = "stop"
    else:
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        body = [
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": function}],
                }
            )
        ]
        finish = "tool_calls"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    last = _sse(
        None,
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "scripted",
            "choices": [],
            "usage": usage,
        },
    )
    return [*body, chunk({}, finish), last, b"data: [DONE]\n\n"]


def _answer_json(path: str, text: str) -> dict[str, Any]:
    if path.endswith("/messages"):
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _events(path: str, text: str, call: ToolCall | None) -> list[bytes]:
    if path.endswith("/messages"):
        return anthropic_events(text, call)
    if path.endswith("/responses"):
        return responses_events(text, call)
    return chat_events(text, call)


@contextmanager
def serve_provider() -> Iterator[Provider]:
    provider = Provider()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # model lists and the like: an empty list
            self._send(200, b'{"data": [], "object": "list"}', "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0") or 0))
            body = json.loads(raw or b"{}")
            path = self.path.split("?", 1)[0]
            with provider.lock:
                provider.bodies.append(body)
                provider.paths.append(path)
            provider.arrived.set()
            if provider.hold is not None:
                provider.hold.wait(120)
            if provider.status != 200:
                error = {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                }
                self._send(provider.status, json.dumps(error).encode(), "application/json")
                return
            if path.endswith("/count_tokens"):
                self._send(200, b'{"input_tokens": 10}', "application/json")
                return
            call = provider.take_tool_call(body)
            if not body.get("stream"):
                self._send(200, json.dumps(_answer_json(path, provider.answer)).encode(), "application/json")
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            try:
                for event in _events(path, provider.answer, call):
                    self.wfile.write(event)
                    self.wfile.flush()
            except OSError:  # the program was killed meanwhile
                pass
            self.close_connection = True

        def _send(self, status: int, data: bytes, kind: str) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    provider.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield provider
    finally:
        if provider.hold is not None:
            provider.hold.set()
        httpd.shutdown()
        httpd.server_close()
