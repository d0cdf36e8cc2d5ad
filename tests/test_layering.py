"""DESIGN.md's layer table, enforced: each layer never imports the ones it must not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "avibe"

ADAPTERS = ("avibe.store", "avibe.providers", "avibe.tools", "avibe.sources", "avibe.backends")
EDGES = ("avibe.cli", "avibe.tui", "avibe.web", "avibe.config")
# layer (package prefix) -> import prefixes it must never use
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "avibe.record": ("avibe.",),  # values: stdlib only (checked with the allow-list below)
    "avibe.checkpoint": (*ADAPTERS, "avibe.agent", "avibe.ingress", *EDGES),
    "avibe.context": (*ADAPTERS, "avibe.agent", "avibe.ingress", *EDGES),
    "avibe.ports": (*ADAPTERS, "avibe.agent", "avibe.checkpoint", "avibe.context", *EDGES),
    "avibe.agent": (*ADAPTERS, *EDGES),
    "avibe.ingress": (*ADAPTERS, *EDGES),
    "avibe.store": ("avibe.agent", "avibe.cli"),
    "avibe.providers": ("avibe.agent", "avibe.cli"),
    "avibe.tools": ("avibe.agent", "avibe.cli"),
    "avibe.sources": ("avibe.agent", "avibe.cli"),
    "avibe.backends": ("avibe.agent", "avibe.cli"),
}
ALLOWED_INSIDE = {"avibe.record": ("avibe.record",)}
# third-party modules the pure core may use (DESIGN: "small pure libs")
PURE_THIRD_PARTY = {"jinja2", "markupsafe"}
IO_MODULES = {
    "os",
    "io",
    "socket",
    "subprocess",
    "sqlite3",
    "pathlib",
    "shutil",
    "tempfile",
    "time",
    "urllib",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    inside = path.is_relative_to(SRC)
    module = _module_name(path) if inside else path.stem
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                names.add(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.add(node.module)
    return names


def _layer(module: str) -> str | None:
    matches = [layer for layer in FORBIDDEN if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def _violations() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        layer = _layer(module)
        if layer is None:
            continue
        allowed = ALLOWED_INSIDE.get(layer, ())
        for name in _imports(path):
            for bad in FORBIDDEN[layer]:
                hit = name == bad.rstrip(".") or name.startswith(bad if bad.endswith(".") else bad + ".")
                hit = hit or name == bad
                if hit and not any(name == ok or name.startswith(ok + ".") for ok in allowed):
                    found.append(f"{module} imports {name} (layer {layer} must not import {bad})")
    return found


def test_layers_never_import_what_design_forbids() -> None:
    assert _violations() == []


@pytest.mark.parametrize("layer", ["avibe.record", "avibe.checkpoint", "avibe.context"])
def test_pure_layers_do_no_io_and_use_only_pure_libraries(layer: str) -> None:
    """The values and the pure core import only the stdlib (minus IO modules), avibe's own pure layers,
    typing helpers, and small pure libraries."""
    import sys

    stdlib = set(sys.stdlib_module_names)
    problems = []
    folder = SRC / layer.split(".", 1)[1]
    for path in sorted(folder.rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in IO_MODULES:
                problems.append(f"{_module_name(path)} imports IO module {name}")
            elif top not in stdlib and top != "avibe" and top not in PURE_THIRD_PARTY:
                problems.append(f"{_module_name(path)} imports third-party {name}")
    assert problems == []


def test_the_checker_itself_catches_a_violation(tmp_path: Path) -> None:
    """Guard against a checker that cannot fail: a core module importing the store is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from avibe.store.sql import SqlStore\nimport avibe.cli\n")
    names = _imports(bad)
    assert {"avibe.store.sql", "avibe.cli"} <= names
    forbidden = FORBIDDEN["avibe.checkpoint"]
    assert any(n.startswith(b + ".") or n == b for n in names for b in forbidden)
