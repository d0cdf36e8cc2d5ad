"""An OpenAI-compatible chat server on loopback for end-to-end tests of `vibe run`: it answers each chat
completion with the next queued assistant message and records every request. (A module of its own name:
`from conftest import` is ambiguous when several test folders run in one pytest call.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self.hold_first: threading.Event | None = None  # set: the first request waits until it is set
        self.first_arrived = threading.Event()
        self.default = "?"  # the reply when nothing is queued

    def say(self, text: str) -> None:
        self.replies.append({"role": "assistant", "content": text})

    def call(self, name: str, **arguments: Any) -> None:
        call = {"id": f"call_{len(self.replies)}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        self.replies.append({"role": "assistant", "content": None, "tool_calls": [call]})

    def tool_outputs(self) -> list[str]:
        return [m["content"] for m in self.requests[-1]["messages"] if m.get("role") == "tool"]

    def answer(self, body: dict[str, Any]) -> bytes:
        self.requests.append(body)
        if len(self.requests) == 1 and self.hold_first is not None:
            self.first_arrived.set()
            self.hold_first.wait(60)
        message = self.replies.pop(0) if self.replies else {"role": "assistant", "content": self.default}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        payload = {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 5}}  # fmt: skip
        return json.dumps(payload).encode()


@contextmanager
def serve_chat() -> Iterator[ChatServer]:
    server = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            data = server.answer(body)
            try:
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
