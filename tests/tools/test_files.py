"""read_file, write_file, edit_file and the path policy, on real files (SPEC A2: files_read/modified)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.tools import MAX_OUTPUT_CHARS, EditFile, PathPolicy, ReadFile, WriteFile, cut_text


@pytest.fixture
def policy(workdir: Path) -> PathPolicy:
    return PathPolicy.of(workdir)


def test_A2_read_file_numbers_lines_and_reports_the_file_read(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    result = ReadFile(policy).run({"path": "notes.txt"})
    assert not result.is_error
    assert result.output.splitlines() == ["     1\talpha", "     2\tbeta", "     3\tgamma"]
    assert result.files_read == ("notes.txt",)
    assert result.files_modified == ()


def test_read_file_offset_and_limit_window_and_say_where_to_go_on(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = ReadFile(policy).run({"path": "long.txt", "offset": 10, "limit": 3})
    lines = result.output.splitlines()
    assert lines[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert lines[3] == "[lines 10-12 of 100; use offset=13 to read on]"
    past = ReadFile(policy).run({"path": "long.txt", "offset": 500})
    assert "offset 500 is past the end" in past.output


def test_read_file_output_is_bounded_with_a_note(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "big.txt").write_text("".join(f"{'x' * 100}\n" for _ in range(400)))
    result = ReadFile(policy).run({"path": "big.txt"})
    assert len(result.output) < MAX_OUTPUT_CHARS + 200
    assert "[output cut:" in result.output
    assert "more chars; use offset/limit or grep]" in result.output


@pytest.mark.parametrize(
    ("setup", "path", "message"),
    [
        (lambda w: None, "missing.txt", "does not exist"),
        (lambda w: (w / "d").mkdir(), "d", "is a directory"),
        (lambda w: (w / "b.bin").write_bytes(b"\x00\x01\x02"), "b.bin", "binary file"),
        (lambda w: (w / "l1.txt").write_bytes(b"caf\xe9"), "l1.txt", "not UTF-8"),
        (lambda w: None, "", "path is empty"),
    ],
)
def test_read_file_problems_are_error_results(
    workdir: Path, policy: PathPolicy, setup: Callable[[Path], object], path: str, message: str
) -> None:
    setup(workdir)
    result = ReadFile(policy).run({"path": path})
    assert result.is_error
    assert message in result.output


def test_read_file_missing_or_wrong_type_arguments(policy: PathPolicy) -> None:
    missing = ReadFile(policy).run({})
    assert missing.is_error and "missing required argument(s) path" in missing.output
    wrong = ReadFile(policy).run({"path": "x", "offset": "ten"})
    assert wrong.is_error and "'offset' must be an integer" in wrong.output
    extra = ReadFile(policy).run({"path": "x", "lines": 3})
    assert extra.is_error and "unknown argument(s) lines" in extra.output


def test_quoted_numbers_from_small_models_are_accepted(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "a.txt").write_text("1\n2\n3\n")
    result = ReadFile(policy).run({"path": "a.txt", "offset": "2", "limit": "1"})
    assert result.output.splitlines()[0] == "     2\t2"


def test_paths_escaping_the_workdir_are_refused(tmp_path: Path, workdir: Path, policy: PathPolicy) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    os.symlink(secret, workdir / "link.txt")
    os.symlink(tmp_path, workdir / "up")
    for path in ["../secret.txt", str(secret), "link.txt", "up/secret.txt", "sub/../../secret.txt"]:
        result = ReadFile(policy).run({"path": path})
        assert result.is_error, path
        assert "outside the readable folders" in result.output
        assert "do not read" not in result.output
    write = WriteFile(policy).run({"path": "../evil.txt", "content": "x"})
    assert write.is_error and "outside the working directory" in write.output
    assert not (tmp_path / "evil.txt").exists()
    edit = EditFile(policy).run({"path": "link.txt", "old": "do", "new": "did"})
    assert edit.is_error
    assert secret.read_text() == "do not read"


def test_a_symlink_that_stays_inside_is_fine(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "real.txt").write_text("inside\n")
    os.symlink(workdir / "real.txt", workdir / "alias.txt")
    assert ReadFile(policy).run({"path": "alias.txt"}).output == "     1\tinside"


def test_extra_read_roots_are_readable_but_not_writable(tmp_path: Path, workdir: Path) -> None:
    extra = tmp_path / "session-tmp"
    extra.mkdir()
    (extra / "mind.md").write_text("# I am here\n")
    policy = PathPolicy.of(workdir, read_roots=[extra])
    read = ReadFile(policy).run({"path": str(extra / "mind.md")})
    assert not read.is_error and "# I am here" in read.output
    assert read.files_read == (str((extra / "mind.md").resolve()),)
    write = WriteFile(policy).run({"path": str(extra / "mind.md"), "content": "gone"})
    assert write.is_error
    assert (extra / "mind.md").read_text() == "# I am here\n"


def test_F3_write_only_lets_exactly_the_named_files_change(tmp_path: Path, workdir: Path) -> None:
    """The checkpoint turn may read anything allowed but change only its two files."""
    turn_dir = tmp_path / "turn"
    turn_dir.mkdir()
    mind, memo = turn_dir / "mind.md", turn_dir / "memo.md"
    mind.write_text("Mission: ship it\n")
    memo.write_text("- [ ] #1 hi\n")
    (workdir / "code.py").write_text("x = 1\n")
    policy = PathPolicy.of(workdir, read_roots=[turn_dir], write_only=[mind, memo])
    ok = EditFile(policy).run({"path": str(memo), "old": "- [ ] #1", "new": "- [x] #1"})
    assert not ok.is_error and memo.read_text() == "- [x] #1 hi\n"
    refused = EditFile(policy).run({"path": "code.py", "old": "x = 1", "new": "x = 2"})
    assert refused.is_error and "may not be changed here" in refused.output
    assert (workdir / "code.py").read_text() == "x = 1\n"
    created = WriteFile(policy).run({"path": str(turn_dir / "other.md"), "content": "x"})
    assert created.is_error and not (turn_dir / "other.md").exists()


def test_write_file_creates_parents_and_reports_the_change(workdir: Path, policy: PathPolicy) -> None:
    tool = WriteFile(policy)
    result = tool.run({"path": "a/b/c.txt", "content": "one\ntwo\n"})
    assert not result.is_error
    assert (workdir / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert result.files_modified == ("a/b/c.txt",)
    assert result.output == "created a/b/c.txt (8 bytes, 2 lines)"
    again = tool.run({"path": "a/b/c.txt", "content": "three"})  # its own write: no read needed
    assert again.output.startswith("overwrote a/b/c.txt"), again.output
    assert WriteFile(policy).run({"path": "a", "content": "x"}).is_error


def test_edit_file_replaces_the_single_occurrence(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "m.py").write_bytes(b"def f():\r\n    return 1\r\n")
    result = EditFile(policy).run({"path": "m.py", "old": "return 1", "new": "return 2"})
    assert not result.is_error, result.output
    assert (workdir / "m.py").read_bytes() == b"def f():\r\n    return 2\r\n"  # line endings kept
    assert result.files_modified == ("m.py",)
    assert "lines 2-2" in result.output


def test_edit_file_says_how_often_an_ambiguous_old_string_occurs(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    result = EditFile(policy).run({"path": "m.py", "old": "x = 1", "new": "x = 2"})
    assert result.is_error and "occurs 3 times" in result.output
    assert (workdir / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"
    assert result.files_modified == ()


def test_edit_file_old_string_not_found_empty_or_unchanged(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "m.py").write_text("x = 1\n")
    tool = EditFile(policy)
    assert "was not found" in tool.run({"path": "m.py", "old": "y = 1", "new": "y = 2"}).output
    assert "`old` is empty" in tool.run({"path": "m.py", "old": "", "new": "z"}).output
    assert "nothing would change" in tool.run({"path": "m.py", "old": "x", "new": "x"}).output
    assert "does not exist" in tool.run({"path": "n.py", "old": "x", "new": "y"}).output
    assert (workdir / "m.py").read_text() == "x = 1\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(alphabet="ab\n", max_size=30),
    old=st.text(alphabet="ab\n", min_size=1, max_size=4),
    new=st.text(alphabet="abc\n", max_size=4),
)
def test_edit_changes_the_file_iff_old_occurs_exactly_once(
    tmp_path: Path, text: str, old: str, new: str
) -> None:
    """Property: success <=> exactly one (non-overlapping) occurrence; the result is that one
    replacement; on any error the file is byte-for-byte unchanged."""
    path = tmp_path / "p.txt"
    path.write_bytes(text.encode())
    result = EditFile(PathPolicy.of(tmp_path)).run({"path": "p.txt", "old": old, "new": new})
    if text.count(old) == 1 and old != new:
        assert not result.is_error
        assert path.read_bytes().decode() == text.replace(old, new, 1)
    else:
        assert result.is_error
        assert path.read_bytes().decode() == text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(st.sampled_from(["..", "/", "a", "b", ".", "~", "work", "x"]), max_size=12).map("".join))
def test_no_path_string_reads_outside_the_allowed_roots(tmp_path: Path, raw: str) -> None:
    """Property: whatever path a model writes, it is refused or resolves inside the workdir."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "a").write_text("inside")
    (tmp_path / "a").write_text("outside")  # reachable as ../a if the policy let it
    policy = PathPolicy.of(work)
    result = ReadFile(policy).run({"path": raw})
    assert "outside\n" not in result.output and not result.output.endswith("\toutside")
    for path in result.files_read:
        assert (work / path).resolve().is_relative_to(work.resolve())
    if result.is_error:
        assert result.files_read == ()


def test_read_file_keeps_crlf_files_readable(workdir: Path, policy: PathPolicy) -> None:
    (workdir / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    assert ReadFile(policy).run({"path": "w.txt"}).output == "     1\tone\n     2\ttwo"


@given(text=st.text(max_size=300), limit=st.integers(min_value=10, max_value=200), tail=st.booleans())
def test_V9_cut_text_is_bounded_and_says_what_was_cut(text: str, limit: int, tail: bool) -> None:
    cut = cut_text(text, "use grep", limit, keep_tail=tail)
    if len(text) <= limit:
        assert cut == text
    else:
        note = f"[output cut: {len(text) - limit} more chars; use grep]"
        assert note in cut and len(cut) == limit + len(note) + (2 if tail else 1)
        assert cut.startswith(text[: limit // 2])


def test_edit_file_with_an_empty_old_creates_a_missing_file_but_never_clobbers(
    workdir: Path, policy: PathPolicy
) -> None:
    """Small models create files with edit_file(old=""): the demo's 1.5B did it for docs/faq.md."""
    tool = EditFile(policy)
    made = tool.run({"path": "docs/faq.md", "old": "", "new": "# FAQ\n"})
    assert not made.is_error and (workdir / "docs" / "faq.md").read_text() == "# FAQ\n"
    (workdir / "m.py").write_text("x = 1\n")
    refused = tool.run({"path": "m.py", "old": "", "new": "z"})
    assert (
        refused.is_error and "mode=append" in refused.output and (workdir / "m.py").read_text() == "x = 1\n"
    )


def test_edit_file_errors_show_the_text_to_copy(workdir: Path, policy: PathPolicy) -> None:
    """The 1.5B asked to change "colour" to "color" sent old="color" new="color" without reading the file,
    then said the word was already there. An edit's error now shows a small file whole, and in a large
    one the line nearest `old` and the word it meant; nothing is changed either way."""
    small = "Title\nPick a colour for the logo.\n"
    (workdir / "notes.txt").write_text(small, encoding="utf-8")
    tool = EditFile(policy)
    for old, new in (("color", "color"), ("color", "colour!")):
        result = tool.run({"path": "notes.txt", "old": old, "new": new})
        assert result.is_error and "nothing was changed" in result.output
        assert result.output.endswith(f"notes.txt is now, whole:\n{small}"), result.output
    big = "".join(f"line {i}: nothing to see\n" for i in range(200)) + "Pick a colour for the logo.\n"
    (workdir / "big.txt").write_text(big, encoding="utf-8")
    near = tool.run({"path": "big.txt", "old": "color", "new": "color!"})
    assert "The nearest line is 201: 'Pick a colour for the logo.'" in near.output
    assert "it has 'colour' where `old` has 'color'" in near.output
    far = tool.run({"path": "big.txt", "old": "completely unrelated words", "new": "x"})
    assert (
        far.is_error and "nearest" not in far.output and "whole" not in far.output
    )  # nothing near: no guess
    assert (workdir / "notes.txt").read_text(encoding="utf-8") == small
    assert (workdir / "big.txt").read_text(encoding="utf-8") == big
