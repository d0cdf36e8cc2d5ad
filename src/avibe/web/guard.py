"""What every web edge of Avibe (`vibe serve`, `vibe inspect`) puts in front of its pages and API.

- The Host header is checked (DNS rebinding): a page of evil.example whose name resolves to 127.0.0.1 can
  make a browser talk to this server, but its requests still say `Host: evil.example`. Only loopback
  names, the address bound and the configured serve_url's host are answered; anything else is 421.
- The socket is bound before anything else is done (a token written, a lease taken), so a port in use is
  one clear line and nothing left behind.
- Security headers for HTML: a strict Content-Security-Policy and no MIME sniffing.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from avibe.errors import AvibeError

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

# The inspector's pages: its own script and style files only; images from itself or data: URLs; the
# live-update stream from itself; never framed (clickjacking); forms post back to itself only.
PAGE_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# A file of an eval folder (an SVG can carry a script): no script, no fetch, an opaque origin.
FILE_CSP: Final = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox"


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _name(host: str) -> str:
    """A host name as compared: lower case, no brackets around IPv6, no trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


def _shown(name: str) -> str:
    return f"[{name}]" if ":" in name else name


@dataclass(frozen=True)
class Hosts:
    """The names this server answers to. Loopback names and the bound address must come with the port
    the request arrived on; `named` are (host, port) pairs from serve_url (port None: any, for a proxy
    in front that passes its own Host on)."""

    local: frozenset[str]
    named: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def of(cls, bind: str, serve_url: str | None = None) -> Hosts:
        local = {*LOOPBACK_NAMES}
        if _name(bind) not in ("0.0.0.0", "::", ""):
            local.add(_name(bind))
        named: set[tuple[str, int | None]] = set()
        if serve_url:
            parts = urlsplit(serve_url)
            if parts.hostname:
                scheme_port = DEFAULT_PORTS.get(parts.scheme, 80)
                named.add((_name(parts.hostname), parts.port or scheme_port))
                if parts.port is None:
                    named.add((_name(parts.hostname), None))
        return cls(frozenset(local), frozenset(named))

    def allows(self, header: str, arrived_on: int | None, scheme: str = "http") -> bool:
        name, port = split_host(header)
        if not name:
            return False
        if name in self.local and (port if port is not None else DEFAULT_PORTS.get(scheme)) == arrived_on:
            return True  # a browser leaves out the scheme's own port (80)
        return (name, port) in self.named

    def describe(self) -> str:
        names = sorted(_shown(n) for n in self.local) + sorted(
            _shown(n) + (f":{p}" if p else "") for n, p in self.named if p is not None
        )
        return ", ".join(names)


def split_host(header: str) -> tuple[str, int | None]:
    """`Host` header -> (name, port or None). ("", None) when it cannot be read."""
    value = header.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return "", None
        name, rest = value[1:end], value[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    else:
        name, _, port_text = value.partition(":")
    if port_text and not (port_text.isdigit() and len(port_text) <= 5):
        return "", None
    return _name(name), int(port_text) if port_text else None


class HostGuard:
    """421 for a request whose Host is not one of `hosts` (paths under `exempt` pass: callbacks, whose
    senders reach this host through names of their own and prove themselves by the callback's secret)."""

    def __init__(self, app: ASGIApp, hosts: Hosts, exempt: Iterable[str] = ()) -> None:
        self.app, self.hosts, self.exempt = app, hosts, tuple(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.exempt):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("host", "")
        server = scope.get("server")
        arrived_on = server[1] if server else None
        if self.hosts.allows(header, arrived_on, scope.get("scheme", "http")):
            await self.app(scope, receive, send)
            return
        message = (
            f"this server does not answer to Host {header[:100]!r}: use {self.hosts.describe()} "
            f"(with port {arrived_on}), or set serve_url to the address you use"
        )
        await JSONResponse({"error": message}, status_code=421)(scope, receive, send)


class SecurityHeaders:
    """Adds a Content-Security-Policy (unless the response set its own), nosniff, no framing and no
    referrer (a token may be in the address) to every HTTP response."""

    def __init__(self, app: ASGIApp, csp: str = PAGE_CSP) -> None:
        self.app, self.csp = app, csp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("content-security-policy", self.csp)
                headers.setdefault("x-content-type-options", "nosniff")
                headers.setdefault("x-frame-options", "DENY")
                headers.setdefault("referrer-policy", "no-referrer")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def listen_socket(host: str, port: int, *, instead: str = "set serve_url") -> socket.socket:
    """A TCP socket listening on host:port, bound now (as uvicorn binds: IPv6 when the host has a colon):
    a port in use is an AvibeError, one line, before anything else is done."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: the connections it accepts carry it, and asyncio switches Nagle off only on a socket
    # that says TCP (without it every response - head, then body - waited ~40 ms for the client's ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no obstacle
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            raise AvibeError(
                f"port {port} on {host} is in use ({reason}); stop the other server or {instead}"
            ) from None
        raise AvibeError(f"cannot listen on {_shown(_name(host))}:{port} ({reason})") from None
    return sock
