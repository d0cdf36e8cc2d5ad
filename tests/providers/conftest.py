"""Provider fixtures: one loaded embedded model per test session, and a local HTTP server that replays
recorded provider responses (no network)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from avibe.config import load_settings
from avibe.providers.embedded import EmbeddedModel, open_embedded
from avibe.providers.modelfile import INSTALL_COMMAND, is_installed

FIXTURES = Path(__file__).parent / "fixtures"
DUMMY_KEY = "sk-avibe-test-dummy-key-never-recorded"


@pytest.fixture(scope="session")
def embedded_model() -> EmbeddedModel:
    """The real embedded model, loaded once (it needs `vibe models install`)."""
    cache = load_settings().model_cache
    if not is_installed(cache):
        pytest.skip(f"the embedded model is not installed in {cache}; run `{INSTALL_COMMAND}`")
    return open_embedded("embedded", cache)


def fixture_response(name: str) -> tuple[int, dict[str, Any]]:
    data = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return int(data["status"]), data["body"]


@dataclass
class WireServer:
    """Serves queued (status, JSON body) responses to any POST and records what it received."""

    url: str
    responses: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def queue(self, *names: str) -> None:
        self.responses.extend(fixture_response(n) for n in names)


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server_box: list[WireServer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            box = server_box[0]
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            box.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status, payload = (
                box.responses.pop(0) if box.responses else (500, {"error": "no response queued"})
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_box.append(WireServer(url=f"http://127.0.0.1:{httpd.server_address[1]}"))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_box[0]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
