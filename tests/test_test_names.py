"""pytest imports test files by their basename (its default "prepend" import mode): two test modules, or
two support modules, of the same name in different folders stop the whole run at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_test_and_support_module_has_a_name_of_its_own() -> None:
    names = Counter(
        path.name for path in TESTS.rglob("*.py") if path.name not in {"conftest.py", "__init__.py"}
    )
    assert [name for name, count in names.items() if count > 1] == []
    assert names["test_test_names.py"] == 1  # the walk sees this folder's files
