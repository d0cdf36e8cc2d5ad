"""Make an eval folder fit to commit: the stored replies, carried texts and quoting notes of every real
session whose licence keeps it out of this repository (`kept: false` in real/manifest.yaml) are replaced
by a note, and the report is written again with its header kept and a "redacted" line added. Verdicts,
counts, tokens and seconds stay; a rescore keeps a redacted probe's verdict. Run it on a copy: what it
replaces is gone from the folder.

Usage: .venv/bin/python scripts/eval-redact.py FOLDER [FOLDER ...]   (each holds results.jsonl, report.md)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from avibe.evals.folders import folders_main, rewrite_folder
from avibe.evals.realset import load_manifest
from avibe.evals.redact import redacted_rows

REDACTED_LINE = (
    "the stored replies and recollections of the sessions not kept here (their licence does not allow it)"
    " are replaced by a note (scripts/eval-redact.py)"
)


def redact_folder(folder: Path) -> int:
    """Redact the folder in place; the number of rows changed."""
    kept = {s.scenario_id for s in load_manifest() if s.kept}

    def redact(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        out = redacted_rows(rows, kept)
        return out, sum(a != b for a, b in zip(rows, out, strict=True))

    return rewrite_folder(folder, redact, ("redacted", REDACTED_LINE))


if __name__ == "__main__":
    raise SystemExit(folders_main("eval-redact", __doc__ or "", sys.argv[1:], redact_folder, "rows redacted"))
