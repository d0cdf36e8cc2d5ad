"""The docs hold together in a clone: every relative link of the README and of docs/ resolves to a file (and
a heading) inside the repository, every docs page is linked from somewhere, the README stays a front door
(under 200 lines, no commit hashes), no markdown file points outside the repository (`../shared`), and
docs/design.md's package map names modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SKIP_DIRS = {"node_modules", "build", "dist", "__pycache__"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _prose(text: str) -> str:
    """The text without fenced code blocks, and each inline code span as one word (a link's text may be
    code; a span's own brackets are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", "code", text, flags=re.S)  # ``a `b` c``, over lines too


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text(encoding="utf-8")))


def _relative(target: str) -> bool:
    return not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("//")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation gone, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _repo_markdown() -> list[Path]:
    found = []
    for path in ROOT.rglob("*.md"):
        parts = path.relative_to(ROOT).parts[:-1]
        if any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info") for p in parts):
            continue
        found.append(path)
    return sorted(found)


@pytest.mark.parametrize("page", DOCS, ids=_name)
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    broken = []
    for target in filter(_relative, _links(page)):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: {_name(resolved)} has no heading #{anchor}")
    assert not broken, f"{_name(page)}:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme_or_another_page() -> None:
    linked = set()
    for page in DOCS:
        for target in filter(_relative, _links(page)):
            path = target.partition("#")[0]
            if path:
                linked.add((page.parent / path).resolve())
    orphans = [_name(p) for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not orphans, (
        f"no page links to {orphans}: link each from the README's Documentation list or from the docs page "
        "it belongs to (a benchmark's own page from docs/benchmarks.md)"
    )


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    hashes = [
        w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"[a-f]", w) and re.search(r"\d", w)
    ]
    assert not hashes, f"commit hashes belong in docs/, next to the run they identify: {hashes}"


def test_no_markdown_file_links_outside_the_repository() -> None:
    outside = [_name(p) for p in _repo_markdown() if "../shared" in p.read_text(encoding="utf-8")]
    assert not outside, f"these link to ../shared, which a clone does not have: {outside}"


def _package_map() -> list[str]:
    """The paths docs/design.md's package map names under src/avibe/ (a bare name after a comma is in
    the folder of the path before it: `checkpoint/tools_mode.py, structured_mode.py`)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text.split("## Package map", 1)[1].split("```", 2)[1]
    paths = []
    for line in block.splitlines():
        named = re.match(r"  ([^\s,]+(?:, [^\s,]+)*)", line)  # continuation lines are indented further
        folder = ""
        for name in named.group(1).split(", ") if named else []:
            if "/" in name.rstrip("/"):
                folder = name.rstrip("/").rsplit("/", 1)[0] + "/"
                paths.append(name)
            else:
                paths.append(folder + name)
    return paths


def test_the_design_package_map_names_modules_that_exist() -> None:
    """The map is a map of this tree: a module moved or renamed takes its line in docs/design.md along."""
    named = _package_map()
    assert "checkpoint/turn.py" in named and "checkpoint/structured_mode.py" in named
    missing = [path for path in named if not (ROOT / "src" / "avibe" / path).exists()]
    assert not missing, f"docs/design.md's package map names what src/avibe/ lacks: {missing}"


def test_the_link_checker_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\nSee [b](b.md#nowhere) and `[not a](link.md)`, ``x `[nor](this.md)` ``,\n"
        "`a span over\na line [break](x.md)`.\n```\n[code](x.md)\n```\n"
    )
    assert _links(page) == ["b.md#nowhere"]
    assert _anchors(page) == {"a-page"}
    assert _slug("The chat: `vibe`") == "the-chat-vibe"
    assert _slug("What the harness keeps, whatever the model answers") == (
        "what-the-harness-keeps-whatever-the-model-answers"
    )
