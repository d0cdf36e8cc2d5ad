"""An eval results folder written again without the model (scripts/eval-rescore.py, scripts/eval-redact.py):
its rows changed by a pure function, results.jsonl replaced whole (never half written), and the report
written again with its header kept and one line stamped by the script."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from avibe.evals.report import header_of, write_report
from avibe.evals.runner import read_results

Rows = list[dict[str, Any]]
Rewrite = Callable[[Rows], tuple[Rows, int]]  # the rows -> (the new rows, how many things it changed)


def rewrite_folder(folder: Path, rewrite: Rewrite, stamp: tuple[str, str]) -> int:
    """`rewrite` applied to the folder's rows; the report's header gets `stamp` (key, line), once."""
    results, report = folder / "results.jsonl", folder / "report.md"
    rows, changed = rewrite(read_results(results))
    partial = results.with_suffix(".jsonl.partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    partial.replace(results)
    key, line = stamp
    header = header_of(report.read_text(encoding="utf-8"), {key}) if report.exists() else {}
    header[key] = line
    write_report(rows, folder, header, plots=any(folder.glob("*.png")))
    return changed


def folders_main(
    script: str, usage: str, folders: Sequence[str], one: Callable[[Path], int], changed: str
) -> int:
    """A script's main over its folder arguments: 2 with the usage when none is given or one has no
    results.jsonl (nothing after it is touched), else 0 with "FOLDER: N <changed>" per folder."""
    if not folders:
        print(usage, file=sys.stderr)
        return 2
    for name in folders:
        folder = Path(name)
        if not (folder / "results.jsonl").is_file():
            print(f"{script}: {folder} has no results.jsonl", file=sys.stderr)
            return 2
        print(f"{folder}: {one(folder)} {changed}")
    return 0
