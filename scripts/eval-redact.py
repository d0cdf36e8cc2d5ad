"""Make an eval folder fit to commit: the stored replies, carried texts and quoting notes of every real
session whose licence keeps it out of this repository (`kept: false` in real/manifest.yaml) are replaced
by a note, and the report is written again with its header kept and a "redacted" line added. Verdicts,
counts, tokens and seconds stay; a rescore keeps a redacted probe's verdict. Run it on a copy: what it
replaces is gone from the folder.

Usage: .venv/bin/python scripts/eval-redact.py FOLDER [FOLDER ...]   (each holds results.jsonl, report.md)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from avibe.evals.realset import load_manifest
from avibe.evals.redact import redacted_rows
from avibe.evals.report import header_of, write_report
from avibe.evals.runner import read_results

REDACTED_LINE = (
    "the stored replies and recollections of the sessions not kept here (their licence does not allow it)"
    " are replaced by a note (scripts/eval-redact.py)"
)


def redact_folder(folder: Path, kept: set[str]) -> int:
    """Redact the folder in place; the number of rows changed."""
    results, report = folder / "results.jsonl", folder / "report.md"
    rows = read_results(results)
    out = redacted_rows(rows, kept)
    partial = results.with_suffix(".jsonl.partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in out), encoding="utf-8")
    partial.replace(results)
    header = header_of(report.read_text(encoding="utf-8"), {"redacted"}) if report.exists() else {}
    header["redacted"] = REDACTED_LINE
    write_report(out, folder, header, plots=any(folder.glob("*.png")))
    return sum(a != b for a, b in zip(rows, out, strict=True))


def main(folders: list[str]) -> int:
    if not folders:
        print(__doc__, file=sys.stderr)
        return 2
    kept = {s.scenario_id for s in load_manifest() if s.kept}
    for name in folders:
        folder = Path(name)
        if not (folder / "results.jsonl").is_file():
            print(f"eval-redact: {folder} has no results.jsonl", file=sys.stderr)
            return 2
        print(f"{folder}: {redact_folder(folder, kept)} rows redacted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
