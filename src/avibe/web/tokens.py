"""The two secrets of `vibe serve` (T1): the serve token and the inspector's key.

- The serve token is the person's: with it, on the local socket (avibe.web.local), a request reads every
  session and posts as the user. It is AVIBE_SERVE_TOKEN, else `serve-token` in Avibe's home (made once,
  owner-only). It never travels over TCP: no TCP route takes it, so a leaked token posts nothing there.
- The inspector's key is a read-only capability of its own, minted at every start: it opens the
  inspector's GET pages over TCP and nothing else. Browsers send a cookie to every port of 127.0.0.1
  (RFC 6265 8.5), so a dev server the agent runs on another port may see it; it must give no write power,
  and it is never the token nor turned into it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse

TOKEN_FILE: Final = "serve-token"


def serve_token_file(home: Path) -> str:
    """The token of this machine's `vibe serve` kept in Avibe's home (made once, owner-only): the person's
    scripts read it there; an agent's sandboxed command cannot (the sandbox hides the home). Several
    hosts started at once on one home agree on one token: the file is made whole, then linked in place,
    and only the first link wins."""
    path = home / TOKEN_FILE
    token = read_token(path)
    if token:
        return token
    home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    made = home / f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    _write_private(made, token)
    try:
        os.link(made, path)
    except FileExistsError:
        found = read_token(path)
        if found:
            return found  # another process made it first
        os.replace(made, path)  # an empty file: make it anew
    finally:
        made.unlink(missing_ok=True)
    return token


def read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def mint_inspector_key(path: Path, token: str) -> str:
    """A fresh random read-only key for the inspector, kept (owner-only) at `path` so the person can open
    the inspector again; never equal to the serve token."""
    key = secrets.token_urlsafe(24)
    while hmac.compare_digest(key.encode(), token.encode()):  # astronomically unlikely; cheap to rule out
        key = secrets.token_urlsafe(24)
    made = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    _write_private(made, key)
    os.replace(made, path)
    return key


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text + "\n")


def bearer_is(request: Request, token: str) -> bool:
    given = request.headers.get("authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def refuse_unauthorised() -> JSONResponse:
    return JSONResponse(
        {
            "error": "this needs the serve token (Authorization: Bearer <token>; on this machine it is in "
            "Avibe's home, serve-token, or AVIBE_SERVE_TOKEN)"
        },
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="avibe"'},
    )
