"""list_files and search_files: bounded, skipping tool folders, never leaving the allowed folders."""

from __future__ import annotations

import os
import shutil
import subprocess
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
    """a listing of long paths came back as 104,060 characters."""
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


@pytest.fixture
def repo(workdir: Path) -> Path:
    """A small project laid out as git would see it: a root .gitignore, a nested one that takes a rule
    back, .git/info/exclude, and the build and log files they ignore."""
    for rel, text in {
        ".gitignore": "# build output\nbuild/\n*.log\n!keep.log\n/secret.env\n",
        ".git/info/exclude": "scratch.txt\n",
        ".git/HEAD": "needle\n",
        "src/app.py": "needle = 1\n",
        "src/.gitignore": "generated_*.py\n!important.log\n",
        "src/generated_x.py": "needle = 2\n",
        "src/important.log": "needle in a log\n",
        "src/debug.log": "needle debug\n",
        "src/secret.env": "needle (only the root one is ignored)\n",
        "keep.log": "needle kept\n",
        "run.log": "needle run\n",
        "secret.env": "needle=1\n",
        "scratch.txt": "needle scratch\n",
        "build/out.py": "needle = 3\n",
        "build/deep/more.py": "needle = 4\n",
        "docs/build/index.md": "needle: a folder pattern matches at any depth\n",
    }.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    return workdir


def test_list_files_skips_what_gitignore_ignores_and_says_so(repo: Path) -> None:
    lines = ListFiles(PathPolicy.of(repo)).run({}).output.splitlines()
    assert lines == [
        "docs/",
        "src/",
        ".gitignore",
        "keep.log",
        "src/.gitignore",
        "src/app.py",
        "src/important.log",
        "src/secret.env",
        "[not listed: 7 ignored by .gitignore (build/, run.log, scratch.txt, secret.env, docs/build/, "
        "and 2 more); give an ignored folder as path to list it]",
    ]


def test_gitignore_rules_apply_when_a_subfolder_is_listed_and_a_pattern_is_given(repo: Path) -> None:
    tool = ListFiles(PathPolicy.of(repo))
    assert tool.run({"path": "src"}).output.splitlines() == [
        "src/.gitignore",
        "src/app.py",
        "src/important.log",
        "src/secret.env",
        "[not listed: 2 ignored by .gitignore (src/debug.log, src/generated_x.py); "
        "give an ignored folder as path to list it]",
    ]
    assert tool.run({"pattern": "*.py"}).output.splitlines() == [
        "src/app.py",
        "[not listed: 3 ignored by .gitignore (build/, docs/build/, src/generated_x.py); "
        "give an ignored folder as path to list it]",
    ]


def test_an_ignored_folder_asked_for_by_name_is_listed(repo: Path) -> None:
    tool = ListFiles(PathPolicy.of(repo))
    assert tool.run({"path": "build"}).output.splitlines() == [
        "build/deep/",
        "build/out.py",
        "build/deep/more.py",
    ]
    assert tool.run({"path": "build/deep"}).output == "build/deep/more.py"


def test_search_files_skips_what_gitignore_ignores_and_says_so(repo: Path) -> None:
    output = SearchFiles(PathPolicy.of(repo)).run({"pattern": "needle"}).output
    assert output.splitlines() == [
        "keep.log:1: needle kept",
        "src/app.py:1: needle = 1",
        "src/important.log:1: needle in a log",
        "src/secret.env:1: needle (only the root one is ignored)",
        "[not searched: 7 ignored by .gitignore (build/, run.log, scratch.txt, secret.env, docs/build/, "
        "and 2 more); give an ignored folder or file as path to search it]",
    ]
    build = SearchFiles(PathPolicy.of(repo)).run({"pattern": "needle", "path": "build"})
    assert build.output.splitlines() == ["build/out.py:1: needle = 3", "build/deep/more.py:1: needle = 4"]
    one = SearchFiles(PathPolicy.of(repo)).run({"pattern": "needle", "path": "run.log"})
    assert one.output == "run.log:1: needle run"


def test_search_files_glob_counts_only_ignored_files_it_would_have_searched(repo: Path) -> None:
    output = SearchFiles(PathPolicy.of(repo)).run({"pattern": "needle", "glob": "*.log"}).output
    assert output.splitlines() == [
        "keep.log:1: needle kept",
        "src/important.log:1: needle in a log",
        "[not searched: 4 ignored by .gitignore (build/, run.log, docs/build/, src/debug.log); "
        "give an ignored folder or file as path to search it]",
    ]


def test_without_gitignore_nothing_more_is_skipped_and_no_note_is_added(tree: Path) -> None:
    output = ListFiles(PathPolicy.of(tree)).run({}).output
    assert "gitignore" not in output and "data.bin" in output


def test_a_broken_or_linked_gitignore_skips_nothing_it_cannot_read(tmp_path: Path, workdir: Path) -> None:
    """Lines git would not understand are dropped (the rest still apply); an ignore file that is a link
    is not followed, so nothing is skipped because of it: more is kept, never less."""
    (workdir / ".gitignore").write_text("!\n[z-a]\n*.tmp\n")
    (workdir / "a.tmp").write_text("")
    (workdir / "a.txt").write_text("")
    sub = workdir / "sub"
    sub.mkdir()
    (tmp_path / "outside-ignore").write_text("*.txt\n")
    os.symlink(tmp_path / "outside-ignore", sub / ".gitignore")
    (sub / "b.txt").write_text("")
    assert ListFiles(PathPolicy.of(workdir)).run({}).output.splitlines() == [
        "sub/",
        ".gitignore",
        "a.txt",
        "sub/b.txt",
        "[not listed: 1 ignored by .gitignore (a.tmp); give an ignored folder as path to list it]",
    ]


def test_list_files_agrees_with_git_on_what_is_ignored(workdir: Path) -> None:
    """git itself is the oracle: the files listed are exactly the ones `git ls-files --others
    --exclude-standard` reports for the same layout (nested files, negations, anchors, folder rules)."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q", str(workdir)], check=True)
    with (workdir / ".git/info/exclude").open("a") as f:
        f.write("scratch.txt\n")
    for rel, text in {
        ".gitignore": "build/\n*.log\n!keep.log\n/secret.env\ndocs/**/draft*\n",
        "src/.gitignore": "generated_*.py\n!important.log\n",
        "src/app.py": "",
        "src/generated_x.py": "",
        "src/important.log": "",
        "src/debug.log": "",
        "src/secret.env": "",
        "src/build": "a file named like the ignored folder",
        "keep.log": "",
        "run.log": "",
        "secret.env": "",
        "scratch.txt": "",
        "build/out.py": "",
        "docs/a/draft1.md": "",
        "docs/a/final.md": "",
        "docs/build/index.md": "",
    }.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    listed = ListFiles(PathPolicy.of(workdir)).run({}).output.splitlines()
    files = {line for line in listed if not line.endswith("/") and not line.startswith("[")}
    untracked = subprocess.run(
        [git, "ls-files", "--others", "--exclude-standard"], cwd=workdir, capture_output=True, text=True
    )
    assert files == set(untracked.stdout.splitlines())
    assert "src/build" in files and "keep.log" in files and "run.log" not in files
