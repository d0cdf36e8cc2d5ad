"""list_files and search_files: bounded, skipping tool folders, never leaving the allowed folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from avibe.tools import ListFiles, PathPolicy, SearchFiles
from avibe.tools.base import MAX_OUTPUT_CHARS
from avibe.tools.search import MAX_LIST_CHARS, MAX_LIST_ENTRIES, MAX_MATCHES, MAX_SEARCH_FILE_BYTES


@pytest.fixture
def tree(workdir: Path) -> Path:
    for rel, text in {
        "src/app.py": "def main():\n    return 'hello'\n",
        "src/util.py": "def helper():\n    pass\n",
        "README.md": "# hello project\n",
        ".git/config": "def main(): secret\n",
        ".venv/lib/x.py": "def main(): venv\n",
        "node_modules/y/index.js": "function main() {}\n",
    }.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    (workdir / "data.bin").write_bytes(b"def main\x00\x01")
    return workdir


def test_list_files_recurses_and_skips_tool_folders(tree: Path) -> None:
    result = ListFiles(PathPolicy.of(tree)).run({})
    assert result.output.splitlines() == ["src/", "README.md", "data.bin", "src/app.py", "src/util.py"]


def test_list_files_pattern_and_subfolder(tree: Path) -> None:
    tool = ListFiles(PathPolicy.of(tree))
    assert tool.run({"pattern": "*.py"}).output.splitlines() == ["src/app.py", "src/util.py"]
    assert tool.run({"path": "src"}).output.splitlines() == ["src/app.py", "src/util.py"]
    assert "(nothing found" in tool.run({"pattern": "*.rs"}).output
    missing = tool.run({"path": "nope"})
    assert missing.is_error and "does not exist" in missing.output
    assert tool.run({"path": ".."}).is_error


def test_list_files_is_bounded(workdir: Path) -> None:
    for i in range(MAX_LIST_ENTRIES + 20):
        (workdir / f"f{i:04}.txt").write_text("")
    lines = ListFiles(PathPolicy.of(workdir)).run({}).output.splitlines()
    assert len(lines) == MAX_LIST_ENTRIES + 1
    assert lines[-1].startswith(f"[listing cut at {MAX_LIST_ENTRIES} entries")


def test_search_files_finds_lines_and_skips_binary_and_tool_folders(tree: Path) -> None:
    result = SearchFiles(PathPolicy.of(tree)).run({"pattern": r"def \w+\("})
    assert result.output.splitlines() == [
        "src/app.py:1: def main():",
        "src/util.py:1: def helper():",
        "[not searched: 1 binary (data.bin)]",
    ]
    only = SearchFiles(PathPolicy.of(tree)).run({"pattern": "hello", "glob": "*.md"})
    assert only.output == "README.md:1: # hello project"
    one_file = SearchFiles(PathPolicy.of(tree)).run({"pattern": "return", "path": "src/app.py"})
    assert one_file.output == "src/app.py:2:     return 'hello'"


def test_search_files_bad_regex_and_no_match(tree: Path) -> None:
    tool = SearchFiles(PathPolicy.of(tree))
    bad = tool.run({"pattern": "def (("})
    assert bad.is_error and "bad regular expression" in bad.output
    none = tool.run({"pattern": "zzz"})
    assert not none.is_error and none.output.startswith("(no line matches")


def test_search_files_is_bounded(workdir: Path) -> None:
    (workdir / "many.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    lines = SearchFiles(PathPolicy.of(workdir)).run({"pattern": "hit"}).output.splitlines()
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-1].startswith(f"[search cut at {MAX_MATCHES} matches")


def test_walks_do_not_follow_links_out_of_the_workdir(tmp_path: Path, workdir: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle\n")
    os.symlink(outside, workdir / "escape")
    os.symlink(outside / "secret.txt", workdir / "secret-link.txt")
    (workdir / "mine.txt").write_text("needle\n")
    policy = PathPolicy.of(workdir)
    assert SearchFiles(policy).run({"pattern": "needle"}).output == "mine.txt:1: needle"
    assert ListFiles(policy).run({}).output == "mine.txt"


def test_list_files_is_bounded_in_characters_and_says_how_many_entries_were_left_out(workdir: Path) -> None:
    """Issue 11: a listing of long paths came back as 104,060 characters."""
    deep = workdir / ("a_rather_long_folder_name_" * 4)
    deep.mkdir()
    for i in range(400):
        (deep / f"{'x' * 120}_{i:03}.txt").write_text("")
    output = ListFiles(PathPolicy.of(workdir)).run({}).output
    lines = output.splitlines()
    assert len(output) <= MAX_LIST_CHARS + 120 < MAX_OUTPUT_CHARS
    shown = len(lines) - 1
    assert lines[-1] == (
        f"[listing cut at {shown} entries: {401 - shown} more left out; narrow it with path or pattern]"
    )


def test_search_files_says_which_files_it_skipped_and_why(workdir: Path) -> None:
    (workdir / "big.csv").write_bytes(b"needle\n" + b"x" * MAX_SEARCH_FILE_BYTES)
    for i in range(7):
        (workdir / f"img{i}.png").write_bytes(b"needle\x00")
    (workdir / "notes.txt").write_text("needle\n")
    output = SearchFiles(PathPolicy.of(workdir)).run({"pattern": "needle"}).output
    assert output.splitlines() == [
        "notes.txt:1: needle",
        "[not searched: 1 over 2 MB (big.csv); "
        "7 binary (img0.png, img1.png, img2.png, img3.png, img4.png, and 2 more)]",
    ]
    none = SearchFiles(PathPolicy.of(workdir)).run({"pattern": "needle", "path": "big.csv"})
    assert none.output == "(no line matches 'needle' in 'big.csv')\n[not searched: 1 over 2 MB (big.csv)]"
