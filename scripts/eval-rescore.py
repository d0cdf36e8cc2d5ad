"""Check an eval folder's stored probe replies and item fates again with the current checks, without the
model.

When a probe check is mended (issue 17: "ask" was found inside "asks", "$40" inside "$400"), the stored
replies are enough to score the runs again; hours of model time need not be spent twice. Rubric verdicts
are the judge model's and stay as they were. A constraint the strategy's own stored text quotes exactly
(a rule wrapped over two lines, quoted line by line) is made exact. Real-session rows are rescored
where their segment is here (scripts/fetch_real_sessions.py). The report is written again with its
header kept and a "rescored" line added.

Usage: .venv/bin/python scripts/eval-rescore.py FOLDER [FOLDER ...]   (each holds results.jsonl, report.md)
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from avibe.evals.report import header_of, write_report
from avibe.evals.runner import read_results, rescored


def rescore_folder(folder: Path) -> int:
    results, report = folder / "results.jsonl", folder / "report.md"
    rows, changed = rescored(read_results(results))
    partial = results.with_suffix(".jsonl.partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    partial.replace(results)
    header = header_of(report.read_text(encoding="utf-8"), {"rescored"}) if report.exists() else {}
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    header["rescored"] = f"{stamp}, probe replies and item fates checked again by scripts/eval-rescore.py"
    write_report(rows, folder, header, plots=any(folder.glob("*.png")))
    return changed


def main(folders: list[str]) -> int:
    if not folders:
        print(__doc__, file=sys.stderr)
        return 2
    for name in folders:
        folder = Path(name)
        if not (folder / "results.jsonl").is_file():
            print(f"eval-rescore: {folder} has no results.jsonl", file=sys.stderr)
            return 2
        print(f"{folder}: {rescore_folder(folder)} verdicts changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
