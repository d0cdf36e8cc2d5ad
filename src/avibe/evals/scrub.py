"""Scrubbing a real session's segment (docs/eval.md): personal data out of the decoded JSON strings of every
line, so each line stays valid JSON - token-shaped secrets, machine identifiers, e-mail addresses, the user
names of home folders and the names the manifest lists. The same bytes in give the same bytes out."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from avibe.errors import RealSessionError

_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}")
_EMAIL_KEEP: Final = ("example.com", "anthropic.com", "openai.com")  # no person's address
_SECRETS: Final = (
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # a JWT
)
SECRET_MARK: Final = "[redacted-secret]"
HASHED: Final = "sha256:"  # a scrub name given by its hash (a pasted password, a key)
_RUN: Final = re.compile(r"[A-Za-z0-9_]{4,}")
# machine identifiers: a network card's MAC address, a Windows account's SID, a public IPv4 address
_MACHINE: Final = (
    (
        re.compile(r"(?<![0-9A-Fa-f:-])(?:[0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:-])"),
        "[redacted-mac]",
    ),
    (re.compile(r"\bS-1-5-21(?:-\d+){1,4}"), "S-1-5-21-[redacted]"),
    (
        re.compile(
            r"(?<![\d.])(?!(?:127|10|0)\.|192\.168\.|172\.(?:1[6-9]|2\d|3[01])\.|255\.)"
            r"(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\d.])"
        ),
        "[redacted-ip]",
    ),
)
SCRUBBED_NAME: Final = "user"
# a home folder that names its user: /Users/NAME, /home/NAME, C:\Users\NAME (any slashes), and Claude
# Code's project folder names made from them (-Users-NAME-..., -home-NAME-..., C--Users-NAME-...)
_HOMES: Final = (
    re.compile(r"(?<![A-Za-z0-9])(/Users/|/home/)(?!user\b)([^/\s\"'\\:]+)"),
    re.compile(r"([A-Za-z]:(?:\\{1,2}|/)Users(?:\\{1,2}|/))(?!user\b)([^\\/\s\"':]+)"),
    re.compile(r"((?:^|[\s/\"'])-(?:Users|home)-)(?!user-)([^-/\s\"']+)"),
    re.compile(r"([A-Za-z]--Users-)(?!user-)([^-/\s\"']+)"),
)


# a home folder's last part that names no person (and words too common to replace wherever they occur)
_NOT_NAMES: Final = frozenset(
    {"user", "shared", "public", "default", "runner", "root", "admin", "guest", "ubuntu", "dev", "developer",
     "test", "code", "work", "app", "build", "node", "docker", "vagrant", "ec2-user", "coder", "vscode"}
)  # fmt: skip


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


def home_names(texts: Iterable[str]) -> set[str]:
    """The user names the home folders in `texts` show (`/Users/NAME`, `C:\\Users\\NAME` ...): the same
    name is scrubbed wherever else it occurs (an `ls -l` owner column, a `cygpath` argument)."""
    found: set[str] = set()
    for text in texts:
        for pattern in _HOMES:
            found |= {m.group(2) for m in pattern.finditer(text)}
    return {name for name in found if len(name) >= 3 and name.casefold() not in _NOT_NAMES}


def _hashed(text: str, digests: frozenset[str]) -> str:
    """Each run of letters, digits and '_' whose sha256 is listed, replaced: a password or key the person
    pasted is scrubbed without the manifest naming it."""
    return _RUN.sub(
        lambda m: SECRET_MARK if hashlib.sha256(m.group(0).encode()).hexdigest() in digests else m.group(0),
        text,
    )


def scrub_text(text: str, names: Iterable[str] = ()) -> str:
    """Personal data out of one string: token-shaped secrets, machine identifiers (MAC addresses, Windows
    SIDs, public IPv4 addresses), e-mail addresses other than the agents' own, the user names of home
    folders, and the given names wherever they occur (whole words, any case); a name given as
    `sha256:HEX` is a secret known by its hash (`_hashed`)."""
    names = list(names)
    digests = frozenset(n.removeprefix(HASHED) for n in names if n.startswith(HASHED))
    names = [n for n in names if not n.startswith(HASHED)]
    if digests:
        text = _hashed(text, digests)
    for pattern in _SECRETS:
        text = pattern.sub(SECRET_MARK, text)
    for pattern, mark in _MACHINE:
        text = pattern.sub(mark, text)
    text = _EMAIL.sub(lambda m: m.group(0) if m.group(0).endswith(_EMAIL_KEEP) else "user@example.com", text)
    for pattern in _HOMES:
        text = pattern.sub(lambda m: m.group(1) + SCRUBBED_NAME, text)
    for name in sorted(set(names), key=lambda n: (-len(n), n)):
        text = re.sub(
            rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", SCRUBBED_NAME, text, flags=re.IGNORECASE
        )
    return text


def _scrub_value(value: Any, names: Iterable[str]) -> Any:
    if isinstance(value, str):
        return scrub_text(value, names)
    if isinstance(value, list):
        return [_scrub_value(v, names) for v in value]
    if isinstance(value, dict):
        return {scrub_text(k, names): _scrub_value(v, names) for k, v in value.items()}
    return value


def scrub(data: bytes, names: Sequence[str] = ()) -> bytes:
    """Every JSONL line's strings scrubbed (`scrub_text`, with the given names and every user name a
    home folder in the segment shows); each line stays one valid JSON value, written compactly with its
    non-ASCII characters as they are. The same bytes in give the same bytes out."""
    values: list[Any] = []
    for number, line in enumerate(data.decode("utf-8").split("\n"), 1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise RealSessionError(f"line {number} of the segment is not JSON ({err.msg})") from None
    every = sorted({*names, *home_names(_strings(values))})
    out = [json.dumps(_scrub_value(v, every), ensure_ascii=False, separators=(",", ":")) for v in values]
    return ("\n".join(out) + "\n").encode("utf-8")
