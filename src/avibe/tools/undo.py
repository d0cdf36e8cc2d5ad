"""Undo for the file tools (the chat's `/undo`, docs/chat.md): write_file and edit_file keep each file as it
was before its first change in a turn, and `undo_last_turn` puts the last turn's files back.

The snapshots live in Avibe's own state (`<home>/sessions/<id>/undo/`), never in the working folder: the
agent is untrusted and cannot reach Avibe's home (the sandbox hides it, the path policy refuses it), so it
can neither forge nor spoil what undo restores. Per turn - the changes since the newest input (a message
of the person's, a watch, a callback) - a folder holds one `manifest.json` and the bytes each file had
before (`<n>.before`); the manifest also keeps the digest each file had after the agent's last change to
it, so undo never overwrites a change someone else made since: that file is refused, by name. Only files
the agent changed through write_file or edit_file are touched. A shell command's changes are not
snapshotted (nothing sees which files it writes); undo says nothing about them.

Undo is git-aware where the folder is a repository: its line says which restored files git now sees as
unchanged from HEAD.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from avibe.ports import RecordStore
from avibe.record.entries import EntryQuery

log = logging.getLogger("avibe.tools.undo")
UNDO_DIR: Final = "undo"  # under the session's folder in Avibe's home
MANIFEST: Final = "manifest.json"
UNDONE: Final = "undone"  # a turn folder already reverted
MAX_SNAPSHOT_BYTES: Final = 16 * 1024 * 1024  # a larger file is not kept; undo refuses it, saying so
KEEP_TURNS: Final = 20  # older turns' snapshots are deleted
LOOK_BACK: Final = 200  # entries read back to find the newest input


def digest(data: bytes | None) -> str:
    return "absent" if data is None else hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def latest_input(store: RecordStore, session_id: str) -> Callable[[], int]:
    """The turn a change belongs to: the seq of the newest entry that is not the agent's own step."""

    def turn() -> int:
        count = store.get_session(session_id).entry_count
        recent = store.query(EntryQuery(session_id, seq_from=max(1, count - LOOK_BACK)))
        inputs = [e.seq for e in recent if e.kind != "assistant"]
        return inputs[-1] if inputs else 0

    return turn


@dataclass
class Snapshots:
    """The file tools' hook: `before` just before a change (the bytes then, None: the file did not exist),
    `after` once it is written. The first `before` of a file in a turn is the one kept."""

    root: Path
    turn: Callable[[], int]

    def before(self, path: Path, shown: str, data: bytes | None) -> None:
        folder = self.root / f"{self.turn():012d}"
        manifest = _load(folder)
        key = str(path)
        if key in manifest["files"]:
            return  # the turn already keeps this file as it was before its first change
        item: dict[str, Any] = {"shown": shown, "existed": data is not None, "after": digest(data)}
        if data is not None and len(data) > MAX_SNAPSHOT_BYTES:
            item["too_large"] = len(data)
        elif data is not None:
            name = f"{len(manifest['files'])}.before"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            item["blob"] = name
        manifest["files"][key] = item
        _save(folder, manifest)
        self._prune()

    def after(self, path: Path) -> None:
        """The file as the agent left it (its digest): what undo expects to find."""
        folder = self.root / f"{self.turn():012d}"
        manifest = _load(folder)
        item = manifest["files"].get(str(path))
        if item is not None:
            item["after"] = digest(_read(path))
            _save(folder, manifest)

    def _prune(self) -> None:
        turns = sorted(p for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
        for old in turns[:-KEEP_TURNS]:
            shutil.rmtree(old, ignore_errors=True)


def _load(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"files": {}}
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else {"files": {}}


def _save(folder: Path, manifest: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f"{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    temporary.replace(folder / MANIFEST)  # whole or not at all: a crash never leaves half a manifest


# ---- undo -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Undone:
    """What undo did: files put back as they were, files removed (the agent created them), files refused
    (with why), and git's view of the restored ones (None: not in a repository)."""

    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    clean_in_git: tuple[str, ...] | None = None
    found: bool = True

    def line(self) -> str:
        if not self.found:
            return "nothing to undo: no file changes by write_file or edit_file are kept for this session"
        parts = []
        if self.restored:
            parts.append("restored " + ", ".join(self.restored))
        if self.removed:
            parts.append("removed " + ", ".join(self.removed) + " (created in that turn)")
        if self.refused:
            parts.append("; ".join(f"left {shown}: {why}" for shown, why in self.refused))
        if self.clean_in_git:
            parts.append("git: " + ", ".join(self.clean_in_git) + " as in HEAD again")
        return "undid the last turn's file changes: " + "; ".join(parts)


def _last_turn(root: Path) -> Path | None:
    turns = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    live = [p for p in turns if not (p / UNDONE).exists() and (p / MANIFEST).exists()]
    return live[-1] if live else None


def _revert(path: Path, item: dict[str, Any], folder: Path) -> str:
    """One file back as it was: "restored", "removed", or why it is left as it is."""
    now = _read(path)
    if digest(now) != item.get("after"):
        return "changed since (by someone else, or a shell command) - not touched"
    if "too_large" in item:
        return f"too large to have been kept ({item['too_large']:,} bytes) - not touched"
    if not item.get("existed"):
        path.unlink(missing_ok=True)
        return "removed"
    before = (folder / str(item.get("blob", ""))).read_bytes()
    if before == now:
        return "unchanged"  # the change was refused after the file was kept: nothing to put back
    temporary = path.with_name(f".{path.name}.avibe-undo")
    temporary.write_bytes(before)
    if path.exists():
        shutil.copymode(path, temporary)
    os.replace(temporary, path)
    return "restored"


def undo_last_turn(root: Path) -> Undone:
    """Revert the newest turn not yet undone; each file only if it is as the agent left it."""
    folder = _last_turn(root)
    if folder is None:
        return Undone(found=False)
    restored: list[tuple[Path, str]] = []
    removed: list[str] = []
    refused: list[tuple[str, str]] = []
    for key, item in _load(folder)["files"].items():
        shown = str(item.get("shown") or key)
        outcome = _revert(Path(key), item, folder)
        if outcome == "restored":
            restored.append((Path(key), shown))
        elif outcome == "removed":
            removed.append(shown)
        elif outcome != "unchanged":
            refused.append((shown, outcome))
    (folder / UNDONE).write_text("1", encoding="utf-8")
    clean = _clean_in_git(restored)
    return Undone(tuple(s for _, s in restored), tuple(removed), tuple(refused), clean)


def _clean_in_git(restored: Sequence[tuple[Path, str]]) -> tuple[str, ...] | None:
    """The restored files git sees as unchanged from HEAD (None: not in a repository, or no git)."""
    if not restored:
        return None
    try:
        top = _git(restored[0][0].parent, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        root = Path(top.stdout.decode().strip())
        status = _git(root, "status", "--porcelain", "-z", "--", *(str(p) for p, _ in restored))
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("undo: git could not say which files match HEAD: %s", exc)
        return None
    entries = (e.decode(errors="replace") for e in status.stdout.split(b"\0") if len(e) > 3)
    changed = {(root / entry[3:]).resolve() for entry in entries}
    return tuple(shown for path, shown in restored if path.resolve() not in changed)


def _git(where: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, timeout=10, check=False)
