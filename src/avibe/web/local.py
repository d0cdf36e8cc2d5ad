"""`vibe serve`'s local socket (T1): the routes that act as the user - reading the sessions, posting
a message as the person - are served only on a Unix socket in Avibe's home, never over TCP.

Why: an agent's sandboxed command may share the machine's network (the person turned it on, or another
local process runs for the agent), and on loopback every process is alike; a token it learns (read
through a link, seen in a log) would let it post as the user. A socket file is reached through the file
system instead: `<home>/serve/<port>.sock`, the folder 0700 and the socket 0600, in the home the sandbox
covers. The serve token is asked on the socket too: reaching the socket (a bind mount left open, a
read-only root that still lets connect() through) and knowing the token are two separate locks.

Over TCP a route of the socket answers 403 with one line naming the socket, whatever token it carries.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from avibe.errors import AvibeError

if TYPE_CHECKING:
    import httpx

SOCKET_DIR: Final = "serve"
MAX_SOCKET_PATH: Final = 107  # bytes: sun_path holds 108 with its terminating NUL (Linux)
LOCAL_ORIGIN: Final = "http://avibe.local"  # the Host a client on the socket names (no Host check there)


def socket_path(home: Path, port: int) -> Path:
    """Where the `vibe serve` listening on TCP `port` serves the person's routes."""
    return home / SOCKET_DIR / f"{port}.sock"


def inspector_key_path(home: Path, port: int) -> Path:
    return home / SOCKET_DIR / f"{port}.inspect-key"


def private_folder(home: Path) -> Path:
    """`<home>/serve`, made owner-only (0700); a link or a file there is refused with one line."""
    folder = home / SOCKET_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode):
        raise AvibeError(f"{folder} must be a folder (it is a link or a file): remove it and start again")
    if found.st_uid != os.getuid():
        raise AvibeError(f"{folder} belongs to another user: remove it and start again")
    os.chmod(folder, 0o700)
    return folder


@dataclass
class LocalSocket:
    """The local socket bound: its file's inode tells, at exit, whether the file is still this one."""

    sock: socket.socket
    path: Path
    inode: int

    def unlink(self) -> None:
        """Remove its file (no new connection), unless another server has put its own there since."""
        with contextlib.suppress(OSError):
            if self.path.lstat().st_ino == self.inode:
                self.path.unlink()

    def close(self) -> None:
        self.unlink()
        self.sock.close()


def listen_local(home: Path, port: int) -> LocalSocket:
    """The local socket, bound and listening (0600 in a 0700 folder). A stale socket (its server gone) is
    removed; one a live server answers on is one line, and nothing is started."""
    private_folder(home)
    path = socket_path(home, port)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise AvibeError(
            f"the local socket's path {path} is longer than a Unix socket allows ({MAX_SOCKET_PATH} "
            "bytes): set AVIBE_HOME to a shorter folder"
        )
    _clear(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)  # the folder is 0700 already: nobody else could connect in between
        sock.listen(512)
        inode = path.lstat().st_ino
    except OSError as exc:
        sock.close()
        raise AvibeError(f"cannot listen on {path} ({exc.strerror or exc})") from None
    return LocalSocket(sock, path, inode)


def _clear(path: Path) -> None:
    """Remove a stale socket at `path`; refuse (one line) a live one or anything else in the way."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise AvibeError(f"{path} is in the way of vibe serve's local socket and is not one: remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise AvibeError(f"cannot tell whether {path} is in use ({exc.strerror or exc})") from None
        path.unlink(missing_ok=True)  # stale: its server is gone
        return
    finally:
        probe.close()
    raise AvibeError(f"another vibe serve is listening on {path}: stop it, or use another --port")


def local_client(home: Path, port: int, token: str, timeout: float = 10.0) -> httpx.Client:
    """An HTTP client of the `vibe serve` on `port`, through its local socket, with the serve token."""
    import httpx

    transport = httpx.HTTPTransport(uds=str(socket_path(home, port)))
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(transport=transport, base_url=LOCAL_ORIGIN, headers=headers, timeout=timeout)


class SocketOnly:
    """What a route of the local socket answers over TCP: 403 and one line naming the socket (the token,
    valid or not, changes nothing: no TCP route takes it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def message(self, route: str) -> str:
        return (
            f'post through the local socket: curl --unix-socket {self.path} -H "Authorization: Bearer '
            f'$(cat <Avibe\'s home>/serve-token)" {LOCAL_ORIGIN}{route} (or vibe run --session S "..."); '
            "over TCP vibe serve takes only callbacks, /health and the read-only inspector"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = str(scope.get("path", ""))[:200]
        await JSONResponse({"error": self.message(route)}, status_code=403)(scope, receive, send)


def run_servers(tcp_app: ASGIApp, tcp: socket.socket, local_app: ASGIApp, local: LocalSocket) -> None:
    """Serve `tcp_app` on the TCP socket and `local_app` on the local one, in one event loop, until
    Ctrl-C (or SIGTERM): the TCP server takes the signals and the local one stops with it. Open
    live-update streams (the inspector's) must not keep Ctrl-C from stopping the server."""
    import asyncio

    import uvicorn

    def config(app: ASGIApp) -> uvicorn.Config:
        return uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)

    class Behind(uvicorn.Server):  # the local socket's server: the signals are the TCP server's
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    class Front(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():  # re-raises the signal caught once its body is done
                try:
                    yield
                finally:
                    behind.should_exit = True
                    local.unlink()  # no new connection from here on, whatever the signal does next

    front, behind = Front(config(tcp_app)), Behind(config(local_app))

    async def both() -> None:
        tasks = [asyncio.ensure_future(front.serve([tcp])), asyncio.ensure_future(behind.serve([local.sock]))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        front.should_exit = behind.should_exit = True
        await asyncio.gather(*tasks)

    with asyncio.Runner(loop_factory=front.config.get_loop_factory()) as runner:
        runner.run(both())
