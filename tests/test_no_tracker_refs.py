"""Comments, docstrings and docs cite what a reader can open: a requirement id of docs/spec.md, a docs/
page, a commit or a date - never a number in an issue tracker that is not in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# "issue N", "Issue N item M", "issues N, M", "issue #N", "issue-N" (in a heading's anchor)
TRACKER_REF = re.compile(r"\bissues?[ -]#?\d+", re.IGNORECASE)
TEXT_SUFFIXES = frozenset(
    [".py", ".md", ".sh", ".toml", ".txt", ".html", ".js", ".css", ".j2", ".jinja", ".yml", ".yaml"]
)
# Folders other work still has to clean; each goes from this list when it has none left.
NOT_YET_CLEAN: tuple[str, ...] = ()


def _cited(folder: str, skipped: tuple[str, ...] = (), root: Path = ROOT) -> list[str]:
    """Each tracker number cited in the text files under `root / folder`, as `path:line: citation`."""
    found = []
    for path in sorted((root / folder).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or rel.startswith(skipped):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            found += [f"{rel}:{number}: {hit.group(0)}" for hit in TRACKER_REF.finditer(line)]
    return found


def test_the_source_cites_no_tracker_number() -> None:
    assert _cited("src") == []


@pytest.mark.parametrize("folder", ["tests", "docs", "scripts", "benchmarks"])
def test_tests_docs_scripts_and_benchmarks_cite_no_tracker_number(folder: str) -> None:
    assert _cited(folder, NOT_YET_CLEAN) == []


def test_the_pattern_finds_each_way_a_tracker_number_was_written(tmp_path: Path) -> None:
    """Guard against a check that cannot fail: each form once seen in this tree is found, prose is not
    (the numbers are put in at run time, so this file does not cite one itself)."""
    n, m = 31, 2
    cited = [
        f"(issue {n} item {m})",
        f"Issue {n}:",
        f"issues {n}, {m}",
        f"issue #{n}",
        f"#claims-issue-{n}-item-{m}",
    ]
    assert all(TRACKER_REF.search(text) for text in cited)
    prose = [
        "say why in the issue's closing note",
        f"a tissue {n} times",
        "issues a token",
        f"Issued {m} times",
    ]
    assert not any(TRACKER_REF.search(text) for text in prose)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(f'"""ok."""\n# the race of issue {n}\n')
    assert _cited("src", root=tmp_path) == [f"src/m.py:2: issue {n}"]
