"""Rooms a newcomer can read: modules over 500 lines and functions over 60 (decorators included) under a
folder, default src/. Prints both lists, longest first; exits 0 (a report, not a gate).

    python3 scripts/sizes.py [FOLDER]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 500
FUNCTION_LINES = 60


def sizes(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    modules: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if (lines := len(text.splitlines())) > MODULE_LINES:
            modules.append((lines, str(path)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (length := node.end_lineno - start + 1) > FUNCTION_LINES:
                    functions.append((length, f"{path}:{node.lineno} {node.name}"))
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def main(argv: list[str]) -> int:
    modules, functions = sizes(Path(argv[0] if argv else "src"))
    print(f"modules over {MODULE_LINES} lines: {len(modules)}")
    print("".join(f"  {n} {where}\n" for n, where in modules), end="")
    print(f"functions over {FUNCTION_LINES} lines: {len(functions)}")
    print("".join(f"  {n} {where}\n" for n, where in functions), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
