"""Real servers for the sandbox tests: a listening socket - TCP on loopback, or a Unix socket -
that answers `ok` and counts the connections it accepted."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A real server that answers `ok` and counts connections (`accepted`)."""

    def __init__(self, family: int, address: str | tuple[str, int]) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.address = self.sock.getsockname()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                try:
                    conn.recv(16)
                    conn.sendall(b"ok")
                except OSError:
                    continue

    def close(self) -> None:
        self.sock.close()
