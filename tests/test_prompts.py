"""The prompts package: every template is rendered by some code, with exactly its fields, and renders.

A template no code renders is an orphan (a text that never reaches a model, like the memo's old tick
guidance); a `render("name", ...)` of a template that does not exist, or with other fields than the
template's own, is a bug that would only show when that path runs. Both are found here statically, from
the AST of every module under src/avibe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from avibe import prompts
from avibe.prompts import fields, fill, names, render, template

SRC = Path(__file__).resolve().parents[1] / "src" / "avibe"
LOADERS = {"render", "fill", "template", "fields"}  # the functions of avibe.prompts taking a template name
FILLERS = {"render", "fill"}  # ... and those that take its fields


@dataclass(frozen=True, slots=True)
class Use:
    name: str
    where: str
    keywords: frozenset[str] | None  # None: not a render/fill call, or one with **fields (not checked)


def _uses(source: str, where: str) -> list[Use]:
    """Every call `render("x", ...)` / `fill("x", ...)` / `template("x")` / `fields("x")` (also as
    `prompts.render(...)`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        first = node.args[0]
        if called not in LOADERS or not isinstance(first, ast.Constant) or not isinstance(first.value, str):
            continue
        keywords = None
        if called in FILLERS and all(k.arg is not None for k in node.keywords):
            keywords = frozenset(k.arg for k in node.keywords if k.arg is not None)
        found.append(Use(first.value, f"{where}:{node.lineno}", keywords))
    return found


def _all_uses() -> list[Use]:
    uses = []
    for path in sorted(SRC.rglob("*.py")):
        uses += _uses(path.read_text(encoding="utf-8"), str(path.relative_to(SRC.parent)))
    return uses


def _orphans(templates: tuple[str, ...], uses: list[Use]) -> list[str]:
    used = {use.name for use in uses}
    return [name for name in templates if name not in used]


def test_every_template_is_rendered_by_some_code() -> None:
    assert _orphans(names(), _all_uses()) == []


def test_every_template_named_in_code_exists() -> None:
    missing = [f"{use.where} names {use.name!r}" for use in _all_uses() if use.name not in names()]
    assert missing == []


def test_every_render_call_passes_exactly_the_templates_fields() -> None:
    wrong = [
        f"{use.where}: {use.name!r} is filled with {sorted(use.keywords)}, the template has "
        f"{sorted(fields(use.name))}"
        for use in _all_uses()
        if use.keywords is not None and use.name in names() and use.keywords != fields(use.name)
    ]
    assert wrong == []


@pytest.mark.parametrize("name", names())
def test_each_template_renders_with_its_documented_fields(name: str) -> None:
    values = {field: f"<<{field}>>" for field in fields(name)}
    text = render(name, **values)
    assert text.endswith("\n") and not text.endswith("\n\n") and text.strip()
    for value in values.values():
        assert value in text  # every field lands in the text
    assert "$" not in text.replace("$$", "")  # no field left unfilled (a typo like `$ name`)
    assert fill(name, **values).strip() + "\n" == text  # a message is its piece, stripped


def test_render_refuses_a_missing_or_an_unknown_field() -> None:
    with pytest.raises(KeyError):
        render("current_request")
    with pytest.raises(KeyError):
        render("current_request", seqs="#3", extra="x")
    with pytest.raises(KeyError):
        fill("recollection_files", files="a.py", extra="x")
    with pytest.raises(FileNotFoundError):
        template("no_such_template")


def test_the_package_sits_below_the_core_it_serves() -> None:
    """avibe.prompts imports nothing of avibe but itself (the layering test checks the whole table)."""
    for path in Path(prompts.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("avibe"):
                assert node.module.startswith("avibe.prompts"), f"{path.name} imports {node.module}"


def test_the_checker_finds_an_orphan_and_a_render_call() -> None:
    """Guard against a checker that cannot fail."""
    uses = _uses('from avibe.prompts import render\nrender("a", x=1)\nprompts.template("b")\n', "fake.py")
    assert [(u.name, u.keywords) for u in uses] == [("a", frozenset({"x"})), ("b", None)]
    assert _orphans(("a", "b", "c"), uses) == ["c"]
