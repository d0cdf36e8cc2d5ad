"""The lock files (scripts/lock.sh) match pyproject.toml: every declared dependency, extras included, is
locked at one exact version inside its range, with hashes - so CI and setup install what the ranges allow."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCKS = (ROOT / "requirements.lock", ROOT / "requirements" / "llama-cpp-python.txt")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    return [Requirement(d) for d in [*project["dependencies"], *(d for ds in extras.values() for d in ds)]]


def _locked(texts: list[str]) -> dict[str, str]:
    return {canonicalize_name(name): version for text in texts for name, version in _PIN.findall(text)}


def _mismatches(declared: list[Requirement], locked: dict[str, str]) -> list[str]:
    problems = []
    for requirement in declared:
        version = locked.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{requirement.name}: not locked (run scripts/lock.sh)")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement.name}: locked {version}, outside {requirement.specifier}")
    return problems


def test_every_declared_dependency_is_locked_inside_its_range() -> None:
    texts = [path.read_text(encoding="utf-8") for path in LOCKS]
    assert _mismatches(_declared(), _locked(texts)) == []


def test_every_locked_version_carries_hashes() -> None:
    for path in LOCKS:
        text = path.read_text(encoding="utf-8")
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 1)[1] if text.startswith("#") else text)
        assert all("--hash=sha256:" in block for block in blocks if _PIN.match(block)), path


def test_pyproject_declares_ranges_not_pins() -> None:
    assert [str(r) for r in _declared() if any(s.operator == "==" for s in r.specifier)] == []


def test_the_check_can_fail() -> None:
    """A dependency missing from the lock, and one locked outside its range, are both reported."""
    declared = [Requirement("sqlalchemy>=2.1,<3"), Requirement("nothere>=1")]
    problems = _mismatches(declared, _locked(["sqlalchemy==3.0.0 \\\n    --hash=sha256:00\n"]))
    assert problems == [
        "sqlalchemy: locked 3.0.0, outside <3,>=2.1",
        "nothere: not locked (run scripts/lock.sh)",
    ]
