"""What changed under a workdir between two looks, for the provenance ledger (avibe/store/provenance.py):
every file whose stamp (inode, ctime, mtime, size) is new, and every loose object git stored meanwhile.

ctime is set by the kernel on every write, rename, link or chmod and cannot be set back (`touch -d` sets
mtime only), so a file the agent changed or moved in has a new stamp. The walk is bounded (entries seen,
files hashed), follows no link, and skips `.git` and dependency folders and Avibe's own home; content is
read the one safe way (avibe/sources/agent_files.py) and only up to `MAX_HASHED_BYTES` - nothing larger
is ever shown as instructions. Git's loose objects are read with zlib here, never by running git (the
repository's config is the agent's to write): a commit made and left on a branch, its working tree put
back within one command, still leaves its blobs. Packed objects are not read (see docs/security.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import zlib
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from avibe.sources.agent_files import list_agent_dir, read_agent_file

log = logging.getLogger(__name__)

Stamp = tuple[int, int, int, int]  # (st_ino, st_ctime_ns, st_mtime_ns, st_size)
MAX_ENTRIES: Final = 50_000  # entries one walk looks at
MAX_HASHED: Final = 5_000  # changed files hashed per look (instruction-like names first)
MAX_HASHED_BYTES: Final = 1024 * 1024
MAX_OBJECTS: Final = 10_000  # new loose git objects read per look
MAX_LOOK_BYTES: Final = 64 * 1024 * 1024  # bytes read per look, files and objects each
SKIPPED: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache",
     ".pytest_cache", ".tox"}
)  # fmt: skip
_HEX2: Final = re.compile(r"[0-9a-f]{2}")
_HEX38: Final = re.compile(r"[0-9a-f]{38,62}")


@dataclass(frozen=True, slots=True)
class Snapshot:
    files: dict[str, Stamp]  # path relative to the workdir -> stamp
    objects: frozenset[str]  # loose objects in <workdir>/.git/objects, as "ab/cdef..."


def snapshot(workdir: Path, skip: Collection[Path] = ()) -> Snapshot:
    """The workdir's files and git objects now; `skip`: folders never walked (Avibe's own home)."""
    return Snapshot(_walk(workdir, {os.path.abspath(p) for p in skip}), _objects(workdir))


def _walk(workdir: Path, skip: set[str]) -> dict[str, Stamp]:
    found: dict[str, Stamp] = {}
    queue: deque[str] = deque([str(workdir)])
    seen = 0
    while queue:
        folder = queue.popleft()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        log.info("provenance: stopped after %d entries under %s", MAX_ENTRIES, workdir)
                        return found
                    _take(entry, workdir, skip, queue, found)
        except OSError:
            continue
    return found


def _take(
    entry: os.DirEntry[str], workdir: Path, skip: set[str], queue: deque[str], found: dict[str, Stamp]
) -> None:
    try:
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIPPED and entry.path not in skip:
                queue.append(entry.path)
        elif entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            rel = os.path.relpath(entry.path, workdir)
            found[rel] = (info.st_ino, info.st_ctime_ns, info.st_mtime_ns, info.st_size)
    except OSError:
        return


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    """The files new or restamped since `before`, instruction-like names first (the bound cuts the rest)."""
    paths = [rel for rel, stamp in after.files.items() if before.files.get(rel) != stamp]
    paths.sort(key=lambda rel: (not rel.endswith(".md"), rel.count("/"), rel))
    if len(paths) > MAX_HASHED:
        log.info("provenance: %d files changed; hashing the first %d", len(paths), MAX_HASHED)
    return paths[:MAX_HASHED]


def content_hashes(workdir: Path, paths: Iterable[str]) -> list[tuple[Path, str]]:
    """(path, sha256) of each file read safely (no link, regular, at most MAX_HASHED_BYTES)."""
    hashes, total = [], 0
    for rel in paths:
        found = read_agent_file(workdir, rel, max_bytes=MAX_HASHED_BYTES, text=False)
        if found.digest is not None:
            hashes.append((workdir / rel, found.digest))
        total += len(found.data)
        if total > MAX_LOOK_BYTES:
            log.info("provenance: %d bytes read under %s; the other changed files not hashed", total, workdir)
            break
    return hashes


# ---- git's loose objects --------------------------------------------------------------------------------


def _objects(workdir: Path) -> frozenset[str]:
    """The loose objects of the workdir's own repository (`.git` a real folder; none otherwise)."""
    names: set[str] = set()
    for prefix in list_agent_dir(workdir, ".git/objects") or []:
        if _HEX2.fullmatch(prefix):
            inside = list_agent_dir(workdir, f".git/objects/{prefix}") or []
            names.update(f"{prefix}/{rest}" for rest in inside if _HEX38.fullmatch(rest))
        if len(names) > MAX_ENTRIES:
            break
    return frozenset(names)


def new_blobs(workdir: Path, before: Snapshot, after: Snapshot) -> list[str]:
    """The sha256 of the content of each file git stored as a loose blob since `before`."""
    fresh = sorted(after.objects - before.objects)[:MAX_OBJECTS]
    hashes, total = [], 0
    for name in fresh:
        found = read_agent_file(workdir, f".git/objects/{name}", max_bytes=MAX_HASHED_BYTES * 2, text=False)
        content = _blob(found.data) if found.ok else None
        if content is not None:
            hashes.append(hashlib.sha256(content).hexdigest())
        total += len(found.data)
        if total > MAX_LOOK_BYTES:
            break
    return hashes


def _blob(compressed: bytes) -> bytes | None:
    """A loose object's content when it is a blob of at most MAX_HASHED_BYTES ("blob <size>\\0<bytes>")."""
    try:
        data = zlib.decompressobj().decompress(compressed, MAX_HASHED_BYTES + 64)
    except zlib.error:
        return None
    header, sep, content = data.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if not sep or kind != b"blob" or not size.isdigit() or int(size) != len(content):
        return None
    return content
