"""An OpenAI-compatible chat server on loopback for end-to-end tests of `vibe run`: it answers each chat
completion with the next queued assistant message and records every request. A request with
`"stream": true` is answered with Server-Sent Events as OpenAI sends them: `data: {chunk}` lines with the
content in pieces and each tool call's arguments in pieces, the usage in a last chunk when
`stream_options.include_usage` asks for it, then `data: [DONE]`. (A module of its own name:
`from conftest import` is ambiguous when several test folders run in one pytest call.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}


class ChatServer:
    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self.hold_first: threading.Event | None = None  # set: the first request waits until it is set
        self.first_arrived = threading.Event()
        self.default = "?"  # the reply when nothing is queued
        self.piece_chars = 4  # streamed content and arguments come in pieces of this many characters
        self.fail_stream_after: int | None = None  # streaming: an error event after this many chunks
        # Answers by content before the queue: a message for a request it recognises, else None (tests
        # with several sessions on one server, whose requests arrive in no fixed order).
        self.responder: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None

    def say(self, text: str) -> None:
        self.replies.append({"role": "assistant", "content": text})

    def call(self, name: str, **arguments: Any) -> None:
        call = {"id": f"call_{len(self.replies)}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        self.replies.append({"role": "assistant", "content": None, "tool_calls": [call]})

    def tool_outputs(self) -> list[str]:
        return [m["content"] for m in self.requests[-1]["messages"] if m.get("role") == "tool"]

    def next_message(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        if self.responder is not None and (chosen := self.responder(body)) is not None:
            return chosen
        if len(self.requests) == 1 and self.hold_first is not None:
            self.first_arrived.set()
            self.hold_first.wait(60)
        return self.replies.pop(0) if self.replies else {"role": "assistant", "content": self.default}

    def answer(self, body: dict[str, Any]) -> bytes:
        message = self.next_message(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        payload = {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": USAGE}  # fmt: skip
        return json.dumps(payload).encode()

    def stream(self, body: dict[str, Any]) -> list[bytes]:
        """The SSE events of a streamed answer, each `data: ...\\n\\n`."""
        message = self.next_message(body)
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        content = message.get("content") or ""
        n = self.piece_chars
        deltas += [{"content": content[i : i + n]} for i in range(0, len(content), n)]
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call["function"]
            start = {"name": function["name"], "arguments": ""}
            deltas.append(
                {"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": start}]}
            )
            arguments = function["arguments"]
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + n]}}]}
                for i in range(0, len(arguments), n)
            ]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        chunks = [_chunk([{"index": 0, "delta": delta, "finish_reason": None}]) for delta in deltas]
        chunks.append(_chunk([{"index": 0, "delta": {}, "finish_reason": finish}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(_chunk([], usage=USAGE))
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        if self.fail_stream_after is not None:
            error = {"error": {"message": "The server had an error while streaming", "type": "server_error"}}
            return [*events[: self.fail_stream_after], f"data: {json.dumps(error)}\n\n".encode()]
        return [*events, b"data: [DONE]\n\n"]


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": choices, **extra}  # fmt: skip


@contextmanager
def serve_chat() -> Iterator[ChatServer]:
    server = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            try:
                if body.get("stream"):
                    events = server.stream(body)
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for event in events:
                        self.wfile.write(event)
                        self.wfile.flush()
                    self.close_connection = True
                    return
                data = server.answer(body)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client was killed meanwhile
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        if server.hold_first is not None:
            server.hold_first.set()
        httpd.shutdown()
        httpd.server_close()
