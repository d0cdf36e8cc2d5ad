"""Check an eval folder's stored probe replies and item fates again with the current checks, without the
model.

When a probe check is mended (as once: "ask" was found inside "asks", "$40" inside "$400"), the stored
replies are enough to score the runs again; hours of model time need not be spent twice. Rubric verdicts
are the judge model's and stay as they were. A constraint the strategy's own stored text quotes exactly
(a rule wrapped over two lines, quoted line by line) is made exact. Real-session rows are rescored
where their segment is here (scripts/fetch_real_sessions.py). The report is written again with its
header kept and a "rescored" line added.

Usage: .venv/bin/python scripts/eval-rescore.py FOLDER [FOLDER ...]   (each holds results.jsonl, report.md)
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from avibe.evals.folders import folders_main, rewrite_folder
from avibe.evals.runner import rescored


def rescore_folder(folder: Path) -> int:
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    line = f"{stamp}, probe replies and item fates checked again by scripts/eval-rescore.py"
    return rewrite_folder(folder, rescored, ("rescored", line))


if __name__ == "__main__":
    raise SystemExit(
        folders_main("eval-rescore", __doc__ or "", sys.argv[1:], rescore_folder, "verdicts changed")
    )
