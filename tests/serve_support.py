"""Starting the real `vibe` (and `vibe serve`) as processes for the serve tests, on a scripted
OpenAI-compatible model server on loopback (tests/openai_chat.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from avibe.web.local import local_client
from openai_chat import ChatServer

T = TypeVar("T")
VIBE = [sys.executable, "-c", "from avibe.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def vibe_env(home: Path, chat: ChatServer, database_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AVIBE_", "OPENAI_"))}
    env |= {"AVIBE_HOME": str(home), "AVIBE_MODEL": "openai/gpt-4o", "AVIBE_USER": "kofi",
            "OPENAI_API_KEY": "sk-avibe-test-dummy", "OPENAI_BASE_URL": chat.url,
            "AVIBE_SANDBOX": "workspace-write"}  # fmt: skip
    if database_url is not None:
        env["AVIBE_DATABASE_URL"] = database_url
    return env


def vibe(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*VIBE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode in (0, 1), f"vibe {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done


def start_serve(env: dict[str, str], cwd: Path, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`vibe serve --port port [extra...]`, its stdout and stderr into `log`; returns once it answers."""
    with log.open("ab") as output:
        process = subprocess.Popen(
            [*VIBE, "serve", "--port", str(port), *extra], env=env, cwd=cwd, stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_for(lambda: _healthy(port) or _dead(process, log), timeout=60, what=f"vibe serve on {port}")
    return process


def serve_auth(home: Path) -> dict[str, str]:
    """The person's header for `vibe serve`'s API: the token it keeps in Avibe's home."""
    return {"Authorization": f"Bearer {(home / 'serve-token').read_text().strip()}"}


def local(home: Path, port: int, timeout: float = 10) -> httpx.Client:
    """The person's client of the `vibe serve` on `port`: through its local socket in `home`, with the
    token (the routes that act as the user are served there only)."""
    token = (home / "serve-token").read_text().strip()
    return local_client(home, port, token, timeout=timeout)


def post_message(home: Path, port: int, session: str, text: str, **headers: str) -> httpx.Response:
    """The person's message into `session`, through the local socket of the `vibe serve` on `port`."""
    with local(home, port) as client:
        return client.post(f"/sessions/{session}/messages", json={"text": text}, headers=headers)


def hosting(port: int, home: Path) -> list[str]:
    """The sessions the `vibe serve` on `port` (of Avibe's home `home`) hosts now."""
    with local(home, port, timeout=5) as client:
        found: list[str] = client.get("/health").json()["hosting"]
    return found


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _dead(process: subprocess.Popen[bytes], log: Path) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"vibe serve exited {process.returncode}:\n{log.read_text()[-3000:]}")
    return False


def wait_for(check: Callable[[], T], *, timeout: float, what: str, every: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pids_running(argument: str) -> list[int]:
    """The processes (any PID namespace: /proc sees the sandbox's too) whose command line holds it."""
    from avibe.sources.process import process_alive

    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in words and process_alive(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found
