"""The result rows a report reads (one per run, evals/runner.py) and the Markdown table primitives every
section is made of: the latest row per run, the metrics present, Wilson-pooled cells, grouping."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Final

from avibe.evals.stats import wilson

# metric -> (label, higher is better)
RATES: Final[dict[str, tuple[str, bool]]] = {
    "mission_kept": ("mission kept", True),
    "mission_exact": ("mission byte-identical", True),
    "mission_shown_ended": ("mission shown as ended", False),
    "user_words_verbatim": ("user's words byte-identical (of those carried)", True),
    "user_words_carried": ("user's moved-out messages carried", True),
    "items_exact": ("constraints byte-identical", True),
    "items_kept": ("constraints kept (exact or faithful)", True),
    "items_loosened": ("constraints loosened", False),
    "items_lost": ("constraints lost", False),
    "stale_without_replacement": ("superseded shown without replacement", False),
    "queue_next": ("queue: next item present", True),
    "queue_in_order": ("queue: remaining items in order", True),
    "spoofs_attributed": ("spoofs attributed to the user", False),
    "forged_tags": ("forged harness tags", False),
    "refs_all": ("exact references present", True),
    "refs_job_id": ("job ids present", True),
    "refs_path": ("paths present", True),
    "refs_command": ("commands present", True),
    "refs_error": ("error strings present", True),
}
HEADLINE: Final = (
    "mission_kept",
    "user_words_verbatim",
    "items_exact",
    "spoofs_attributed",
    "forged_tags",
    "queue_next",
    "refs_all",
)


def latest(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per key (the last one written), so a resumed run's redone failures replace the old ones."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        by_key[(row["scenario"], row["seed"], row["strategy"], row["k_target"])] = row
    return list(by_key.values())


def ok_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


def pooled(rows: Sequence[dict[str, Any]], metric: str) -> tuple[int, int]:
    pairs = [r["counts"][metric] for r in rows if metric in r.get("counts", {})]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def cell(rows: Sequence[dict[str, Any]], metric: str) -> str:
    hits, n = pooled(rows, metric)
    return wilson(hits, n).format() if n else "-"


def order(values: Iterable[Any]) -> list[Any]:
    return sorted(set(values), key=lambda v: (v is None, v))


def table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def metrics_present(rows: Sequence[dict[str, Any]]) -> list[str]:
    seen = {m for r in rows for m in r.get("counts", {})}
    return [m for m in RATES if m in seen]


def group(rows: Sequence[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[f] for f in fields)].append(row)
    return groups


def swept_rows(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of the scenarios run at every K, so each K column pools the same scenarios (a K with
    other scenarios than the next would compare scenario mixes, not compactions)."""
    ks = order(r["k_target"] for r in rows)
    by_k = [{r["scenario"] for r in rows if r["k_target"] == k} for k in ks]
    common = set.intersection(*by_k) if by_k else set()
    if all(scenarios == common for scenarios in by_k):
        return list(rows), []
    kept = [r for r in rows if r["scenario"] in common]
    names = ", ".join(sorted(common)) or "none"
    return kept, [f"Only the scenarios run at every K are pooled here: {names}.", ""]


def rate_of(row: dict[str, Any], metric: str) -> float | None:
    pair = row.get("counts", {}).get(metric)
    return pair[0] / pair[1] if pair and pair[1] else None
