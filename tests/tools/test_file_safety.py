"""Tools that do not destroy work and file tools that cannot be led out of the
workdir, on real files: read before overwrite, append, edit diffs, hard links,
symlinks swapped in after the path check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from avibe.tools import PathPolicy
from avibe.tools.base import open_nofollow
from avibe.tools.files import EditFile, ReadFile, ReadLedger, WriteFile
from avibe.tools.files.text import MAX_DIFF_LINES


class Tools:
    """read_file, write_file and edit_file sharing one ledger, as `default_tools` builds them."""

    def __init__(self, policy: PathPolicy) -> None:
        ledger = ReadLedger()
        self.read, self.write, self.edit = (
            ReadFile(policy, ledger),
            WriteFile(policy, ledger),
            EditFile(policy, ledger),
        )


@pytest.fixture
def tools(workdir: Path) -> Tools:
    return Tools(PathPolicy.of(workdir))


# --- read before overwrite -------------------------------------------------------------------------


def test_write_file_refuses_to_overwrite_a_file_not_read(workdir: Path, tools: Tools) -> None:
    """The demo overwrote CHANGELOG.md and lost ticket 001's line."""
    (workdir / "CHANGELOG.md").write_text("- 001: fixed the parser\n")
    result = tools.write.run({"path": "CHANGELOG.md", "content": "- 002: new flag\n"})
    assert result.is_error and result.files_modified == ()
    assert "you have not read it in this session" in result.output
    assert "read_file" in result.output and "mode=append" in result.output
    assert (workdir / "CHANGELOG.md").read_text() == "- 001: fixed the parser\n"


def test_write_file_overwrites_a_file_once_read(workdir: Path, tools: Tools) -> None:
    (workdir / "guide.md").write_text("# Guide\nold\n")
    assert not tools.read.run({"path": "guide.md", "limit": 1}).is_error  # any window counts as read
    result = tools.write.run({"path": "guide.md", "content": "# Guide\nnew\n"})
    assert not result.is_error and result.output.startswith("overwrote guide.md")
    assert (workdir / "guide.md").read_text() == "# Guide\nnew\n"


def test_write_file_refuses_a_file_changed_since_it_was_read(workdir: Path, tools: Tools) -> None:
    target = workdir / "notes.txt"
    target.write_text("v1\n")
    tools.read.run({"path": "notes.txt"})
    target.write_text("v2\n")  # the user (or a shell command) changed it meanwhile; same size
    result = tools.write.run({"path": "notes.txt", "content": "mine\n"})
    assert result.is_error and "it changed since you read it" in result.output
    assert target.read_text() == "v2\n"
    tools.read.run({"path": "notes.txt"})
    assert not tools.write.run({"path": "notes.txt", "content": "mine\n"}).is_error
    assert target.read_text() == "mine\n"


def test_a_read_through_another_ledger_does_not_count(workdir: Path) -> None:
    """The ledger is what makes a read count: tools that do not share it do not share reads."""
    (workdir / "a.txt").write_text("a\n")
    policy = PathPolicy.of(workdir)
    ReadFile(policy, ReadLedger()).run({"path": "a.txt"})
    assert WriteFile(policy, ReadLedger()).run({"path": "a.txt", "content": "b"}).is_error


def test_own_writes_and_edits_of_a_known_file_keep_it_writable(workdir: Path, tools: Tools) -> None:
    assert tools.write.run({"path": "new.md", "content": "one\n"}).output.startswith("created")
    assert not tools.write.run({"path": "new.md", "content": "two\n"}).is_error  # write after own write
    assert not tools.edit.run({"path": "new.md", "old": "two", "new": "three"}).is_error
    assert not tools.write.run({"path": "new.md", "content": "four\n"}).is_error  # after own edit
    assert (workdir / "new.md").read_text() == "four\n"


def test_an_edit_of_an_unread_file_does_not_license_an_overwrite(workdir: Path, tools: Tools) -> None:
    """An edit needs only its exact `old` text, not the whole file: the file stays unread."""
    (workdir / "big.py").write_text("x = 1\ny = 2\n")
    assert not tools.edit.run({"path": "big.py", "old": "x = 1", "new": "x = 3"}).is_error
    assert tools.write.run({"path": "big.py", "content": "gone\n"}).is_error
    assert (workdir / "big.py").read_text() == "x = 3\ny = 2\n"


def test_an_empty_existing_file_may_be_overwritten_unread(workdir: Path, tools: Tools) -> None:
    (workdir / "empty.txt").touch()
    result = tools.write.run({"path": "empty.txt", "content": "filled\n"})
    assert not result.is_error and result.output.startswith("overwrote")
    assert (workdir / "empty.txt").read_text() == "filled\n"


# --- append ----------------------------------------------------------------------------------------


def test_append_needs_no_read_and_keeps_what_was_there(workdir: Path, tools: Tools) -> None:
    log = workdir / "CHANGELOG.md"
    log.write_text("- 001: fixed the parser")  # no final line break
    result = tools.write.run({"path": "CHANGELOG.md", "content": "- 002: new flag\n", "mode": "append"})
    assert not result.is_error, result.output
    assert result.output.startswith("appended to CHANGELOG.md") and result.files_modified == ("CHANGELOG.md",)
    assert log.read_text() == "- 001: fixed the parser\n- 002: new flag\n"
    tools.write.run({"path": "CHANGELOG.md", "content": "- 003: docs\n", "mode": "append"})
    assert log.read_text() == "- 001: fixed the parser\n- 002: new flag\n- 003: docs\n"
    assert tools.write.run({"path": "CHANGELOG.md", "content": "x"}).is_error  # still never read whole


def test_append_creates_a_missing_file_and_keeps_a_known_file_known(workdir: Path, tools: Tools) -> None:
    assert tools.write.run(
        {"path": "logs/run.log", "content": "start\n", "mode": "append"}
    ).output.startswith("created logs/run.log")
    tools.write.run({"path": "logs/run.log", "content": "step\n", "mode": "append"})
    assert (workdir / "logs/run.log").read_text() == "start\nstep\n"
    assert not tools.write.run({"path": "logs/run.log", "content": "fresh\n"}).is_error  # known throughout


def test_an_unknown_write_mode_is_an_error(workdir: Path, tools: Tools) -> None:
    result = tools.write.run({"path": "x.txt", "content": "x", "mode": "prepend"})
    assert result.is_error and "overwrite or append" in result.output
    assert not (workdir / "x.txt").exists()


# --- edit diff -------------------------------------------------------------------------------------


def test_edit_file_shows_a_short_unified_diff(workdir: Path, tools: Tools) -> None:
    (workdir / "m.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    result = tools.edit.run({"path": "m.py", "old": "line 10\n", "new": "line ten\nline 10.5\n"})
    assert not result.is_error
    diff = result.output.splitlines()[1:]
    assert diff[:2] == ["--- a/m.py", "+++ b/m.py"]
    assert "-line 10" in diff and "+line ten" in diff and "+line 10.5" in diff
    assert " line 9" in diff and " line 1" not in diff  # two lines of context, not the file


def test_the_diff_of_a_large_edit_is_bounded(workdir: Path, tools: Tools) -> None:
    (workdir / "m.py").write_text("start\nend\n")
    new = "".join(f"{'x' * 500} {i}\n" for i in range(200))
    result = tools.edit.run({"path": "m.py", "old": "start\n", "new": new})
    diff = result.output.splitlines()[1:]
    assert len(diff) == MAX_DIFF_LINES + 1 and diff[-1].startswith("[diff cut: ")
    assert max(len(line) for line in diff) < 300
    assert (workdir / "m.py").read_text() == new + "end\n"


# --- links -----------------------------------------------------------------------------------------


def test_a_hard_link_to_an_outside_file_is_never_written(tmp_path: Path, workdir: Path, tools: Tools) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    os.link(outside, workdir / "linked.txt")
    tools.read.run({"path": "linked.txt"})  # read, so only the link can stop the overwrite
    calls = [
        (tools.write, {"path": "linked.txt", "content": "pwned\n"}),
        (tools.write, {"path": "linked.txt", "content": "pwned\n", "mode": "append"}),
        (tools.edit, {"path": "linked.txt", "old": "secret = 1", "new": "secret = 2"}),
    ]
    for tool, arguments in calls:
        result = tool.run(arguments)
        assert result.is_error and "2 hard links" in result.output, result.output
    assert outside.read_text() == "secret = 1\n"


def test_a_symlink_out_is_refused_for_every_file_tool(tmp_path: Path, workdir: Path, tools: Tools) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    os.symlink(outside, workdir / "sym.txt")
    for tool, arguments in [
        (tools.read, {"path": "sym.txt"}),
        (tools.write, {"path": "sym.txt", "content": "pwned\n", "mode": "append"}),
        (tools.write, {"path": "sym.txt", "content": "pwned\n"}),
        (tools.edit, {"path": "sym.txt", "old": "secret = 1", "new": "secret = 2"}),
    ]:
        result = tool.run(arguments)
        assert result.is_error and "outside" in result.output and "secret" not in result.output
    assert outside.read_text() == "secret = 1\n"


class SwappingPolicy(PathPolicy):
    """A path policy that, right after its check passes, swaps `victim` for a symlink to `target`: the
    check-then-open race (docs/security.md: the check sees a plain file or folder, the open meets a link),
    made certain."""

    victim: Path
    target: Path

    def _swap(self, checked: Path) -> Path:
        if self.victim.is_symlink():
            return checked
        if self.victim.is_dir() and not self.victim.is_symlink():
            self.victim.rename(self.victim.with_name("moved-away"))
        elif self.victim.exists():
            self.victim.unlink()
        self.victim.symlink_to(self.target)
        return checked

    def readable(self, raw: str) -> Path:
        return self._swap(super().readable(raw))

    def writable(self, raw: str) -> Path:
        return self._swap(super().writable(raw))


def _swapping(workdir: Path, victim: Path, target: Path) -> SwappingPolicy:
    policy = SwappingPolicy(workdir)
    object.__setattr__(policy, "victim", victim)
    object.__setattr__(policy, "target", target)
    return policy


@pytest.mark.parametrize("mode", ["overwrite", "append"])
def test_a_file_swapped_for_a_symlink_after_the_check_is_not_written(
    tmp_path: Path, workdir: Path, mode: str
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    victim = workdir / "f.txt"
    victim.write_text("")  # empty: an overwrite needs no read, so only the link can stop it
    write = WriteFile(_swapping(workdir, victim, outside))
    result = write.run({"path": "f.txt", "content": "pwned\n", "mode": mode})
    assert result.is_error and "is a link that appeared" in result.output, result.output
    assert outside.read_text() == "secret = 1\n"


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_written(tmp_path: Path, workdir: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workdir / "sub").mkdir()
    write = WriteFile(_swapping(workdir, workdir / "sub", outside))
    result = write.run({"path": "sub/new.txt", "content": "pwned\n"})
    assert result.is_error and "is a link that appeared" in result.output, result.output
    assert list(outside.iterdir()) == []


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_read(tmp_path: Path, workdir: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    (workdir / "f.txt").write_text("inside\n")
    result = ReadFile(_swapping(workdir, workdir / "f.txt", outside)).run({"path": "f.txt"})
    assert result.is_error and "secret" not in result.output


SWAPPER = """
import os, sys
victim, spare, outside = sys.argv[1:]
while True:
    try:
        os.symlink(outside, spare)
        os.replace(spare, victim)  # now a link out
        with open(spare, "w"):
            pass
        os.replace(spare, victim)  # a plain file again
    except OSError:
        pass
"""


def test_a_racing_symlink_swap_never_lets_a_write_out(tmp_path: Path, workdir: Path) -> None:
    """The symlink race (it won 86 times in 3,000 before the fix): another process keeps swapping the file
    for a link to an outside file while write_file appends to it. On busy cores the racer may get little
    time, so the writes go on (up to a cap) until both outcomes were seen - the race really ran."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    victim = workdir / "f.txt"
    victim.write_text("")
    args = [str(victim), str(workdir / "swap.tmp"), str(outside)]
    racer = subprocess.Popen([sys.executable, "-c", SWAPPER, *args])
    try:
        write = WriteFile(PathPolicy.of(workdir))
        results = []
        while len(results) < 1_500 or (len(results) < 30_000 and len({r.is_error for r in results}) < 2):
            results.append(write.run({"path": "f.txt", "content": "x\n", "mode": "append"}))
    finally:
        racer.kill()
        racer.wait()
    assert outside.read_text() == "secret = 1\n"
    assert any(not r.is_error for r in results) and any(r.is_error for r in results)  # it did race


def test_open_nofollow_refuses_a_link_at_any_component(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.close(open_nofollow(tmp_path / "real" / "f.txt", os.O_RDONLY))
    for path in (tmp_path / "alias" / "f.txt", tmp_path / "alias"):
        with pytest.raises(OSError):
            os.close(open_nofollow(path, os.O_RDONLY))


def test_a_fifo_is_refused_without_blocking(workdir: Path, tools: Tools) -> None:
    os.mkfifo(workdir / "pipe")
    result = tools.read.run({"path": "pipe"})
    assert result.is_error and "not a regular file" in result.output
