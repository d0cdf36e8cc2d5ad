"""Provider fixtures: one loaded embedded model per test session, and a local HTTP server that replays
recorded provider responses (no network)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from provider_support import WireServer

from avibe.config import load_settings
from avibe.providers.embedded import EmbeddedModel, open_embedded
from avibe.providers.modelfile import INSTALL_COMMAND, is_installed


@pytest.fixture(scope="session")
def embedded_model() -> EmbeddedModel:
    """The real embedded model, loaded once (it needs `vibe models install`)."""
    cache = load_settings().model_cache
    if not is_installed(cache):
        if os.environ.get("CI"):  # CI installs the model first (scripts/setup.sh): never skip there
            pytest.fail(f"the embedded model is not installed in {cache}; run `{INSTALL_COMMAND}`")
        pytest.skip(f"the embedded model is not installed in {cache}; run `{INSTALL_COMMAND}`")
    return open_embedded("embedded", cache)


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
