"""/undo's snapshots (docs/chat.md): write_file and edit_file keep each file as it was before its first
change in a turn - in Avibe's own folder, never the working one - and `undo_last_turn` puts the last
turn's files back: git-aware, never touching a file the agent did not change, refusing (by name) a file
changed since by someone else. Real files, a real SQLite record for the turns, real git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.ingress import deliver
from avibe.ports import RecordStore
from avibe.record.entries import Source
from avibe.tools import EditFile, PathPolicy, ReadFile, WriteFile
from avibe.tools.files import ReadLedger
from avibe.tools.undo import Snapshots, latest_input, undo_last_turn

USER = Source("user", name="ana")


def _tools(
    workdir: Path, root: Path, store: RecordStore, session_id: str
) -> tuple[ReadFile, WriteFile, EditFile]:
    """The file tools as `default_tools` makes them: one ledger, one snapshot keeper."""
    snapshots = Snapshots(root, latest_input(store, session_id))
    policy, ledger = PathPolicy.of(workdir), ReadLedger()
    return (ReadFile(policy, ledger), WriteFile(policy, ledger, snapshots=snapshots),
            EditFile(policy, ledger, snapshots=snapshots))  # fmt: skip


@pytest.fixture
def undo_root(tmp_path: Path) -> Path:
    return tmp_path / "home" / "sessions" / "s" / "undo"  # Avibe's home, beside the working folder


def test_undo_reverts_the_last_turns_writes_and_edits_and_nothing_else(
    workdir: Path, undo_root: Path, store: RecordStore, session_id: str
) -> None:
    (workdir / "keep.txt").write_text("the person's\n")
    (workdir / "app.py").write_text("VERSION = 1\n")
    _, write, edit = _tools(workdir, undo_root, store, session_id)
    deliver(store, session_id, USER, "first turn")
    assert not edit.run({"path": "app.py", "old": "VERSION = 1", "new": "VERSION = 2"}).is_error
    deliver(store, session_id, USER, "second turn")
    assert not edit.run({"path": "app.py", "old": "VERSION = 2", "new": "VERSION = 3"}).is_error
    assert not edit.run({"path": "app.py", "old": "VERSION = 3", "new": "VERSION = 4"}).is_error
    assert not write.run({"path": "new/notes.md", "content": "draft\n"}).is_error
    (workdir / "keep.txt").write_text("the person's, changed\n")  # never the agent's: never touched
    assert not undo_root.is_relative_to(workdir) and any(undo_root.rglob("*.before"))

    undone = undo_last_turn(undo_root)
    assert (workdir / "app.py").read_text() == "VERSION = 2\n"  # as before the turn's first change
    assert not (workdir / "new" / "notes.md").exists()
    assert (workdir / "keep.txt").read_text() == "the person's, changed\n"
    assert undone.restored == ("app.py",) and undone.removed == ("new/notes.md",) and not undone.refused
    assert undone.line().startswith(
        "undid the last turn's file changes: restored app.py; removed new/notes.md"
    )

    assert undo_last_turn(undo_root).restored == ("app.py",)  # again: the turn before
    assert (workdir / "app.py").read_text() == "VERSION = 1\n"
    assert not undo_last_turn(undo_root).found
    assert undo_last_turn(undo_root).line().startswith("nothing to undo")


def test_a_file_changed_since_by_someone_else_is_refused_by_name(
    workdir: Path, undo_root: Path, store: RecordStore, session_id: str
) -> None:
    (workdir / "a.txt").write_text("one\n")
    (workdir / "b.txt").write_text("uno\n")
    _, _, edit = _tools(workdir, undo_root, store, session_id)
    deliver(store, session_id, USER, "change both")
    edit.run({"path": "a.txt", "old": "one", "new": "two"})
    edit.run({"path": "b.txt", "old": "uno", "new": "dos"})
    (workdir / "b.txt").write_text("tres\n")  # the person (or a shell command) changed it since
    undone = undo_last_turn(undo_root)
    assert (workdir / "a.txt").read_text() == "one\n" and (workdir / "b.txt").read_text() == "tres\n"
    assert undone.restored == ("a.txt",)
    assert undone.refused == (("b.txt", "changed since (by someone else, or a shell command) - not touched"),)
    assert "left b.txt: changed since" in undone.line()


def test_a_refused_overwrite_is_not_reported_as_a_change(
    workdir: Path, undo_root: Path, store: RecordStore, session_id: str
) -> None:
    (workdir / "a.txt").write_text("one\n")
    _, write, _ = _tools(workdir, undo_root, store, session_id)
    deliver(store, session_id, USER, "overwrite it")
    assert write.run({"path": "a.txt", "content": "blind\n"}).is_error  # not read first: refused
    undone = undo_last_turn(undo_root)
    assert (workdir / "a.txt").read_text() == "one\n" and undone.restored == () and not undone.refused


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_in_a_repository_undo_says_which_files_are_as_in_head_again(
    workdir: Path, undo_root: Path, store: RecordStore, session_id: str
) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(workdir), *args], check=True, capture_output=True)

    git("init", "-q")
    (workdir / "a.txt").write_text("one\n")
    (workdir / "b.txt").write_text("uno\n")
    git("add", ".")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "start")
    (workdir / "b.txt").write_text("uno, uncommitted\n")  # the person's own change before the turn
    read, _, edit = _tools(workdir, undo_root, store, session_id)
    deliver(store, session_id, USER, "change both")
    edit.run({"path": "a.txt", "old": "one", "new": "two"})
    read.run({"path": "b.txt"})
    edit.run({"path": "b.txt", "old": "uncommitted", "new": "edited"})
    undone = undo_last_turn(undo_root)
    assert undone.clean_in_git == ("a.txt",)  # b.txt is back to the person's uncommitted text
    assert (workdir / "b.txt").read_text() == "uno, uncommitted\n"
    assert "git: a.txt as in HEAD again" in undone.line()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="abcxyz\n", min_size=1, max_size=12), min_size=1, max_size=5))
def test_undo_always_restores_the_bytes_before_the_turn(
    tmp_path: Path, store: RecordStore, session_id: str, contents: list[str]
) -> None:
    work = tmp_path / "prop"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(tmp_path / "undo-prop", ignore_errors=True)
    work.mkdir()
    (work / "f.txt").write_text("original\n")
    read, write, _ = _tools(work, tmp_path / "undo-prop", store, session_id)
    deliver(store, session_id, USER, "rewrite it")
    for content in contents:
        read.run({"path": "f.txt"})
        assert not write.run({"path": "f.txt", "content": content}).is_error
    undo_last_turn(tmp_path / "undo-prop")
    assert (work / "f.txt").read_text() == "original\n"
