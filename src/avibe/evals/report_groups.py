"""Report sections for the real-session set (docs/eval.md): the probes broken down by what a session is -
the person's language, whether a standing request of theirs has none of the memo's rule words, whether
they revised a rule, whether the peer compacted the original - and the cost of one compaction.

Pure: the labels of each scenario come in from the caller (avibe.evals.realset.session_labels reads them
from the manifest and the truth), so the same rows always give the same tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from avibe.evals.rows import order, table
from avibe.evals.stats import wilson

Labels = Mapping[str, Mapping[str, str]]  # scenario id -> {dimension: value}


def _rate(probes: Sequence[dict[str, Any]]) -> str:
    judged = [p for p in probes if p.get("passed") is not None]
    if not judged:
        return "-"
    return wilson(sum(bool(p["passed"]) for p in judged), len(judged)).format()


def probes_by_label(rows: Sequence[dict[str, Any]], strategies: list[str], labels: Labels) -> list[str]:
    """Per dimension, one table: a line per (value, probe kind), a column per strategy, the pass rate with
    its Wilson interval and the number of probes judged (pooled over the sessions of that value)."""
    out: list[str] = []
    dimensions = order(d for by in labels.values() for d in by)
    for dimension in dimensions:
        values = order(by[dimension] for by in labels.values() if dimension in by)
        body = []
        for value in values:
            scenarios = {s for s, by in labels.items() if by.get(dimension) == value}
            mine = [r for r in rows if r["scenario"] in scenarios]
            for kind in order(p["kind"] for r in mine for p in r.get("probes", [])):
                cells = [
                    _rate(
                        [
                            p
                            for r in mine
                            if r["strategy"] == s
                            for p in r.get("probes", [])
                            if p["kind"] == kind
                        ]
                    )
                    for s in strategies
                ]
                sessions = len({r["scenario"] for r in mine})
                body.append([value, kind, str(sessions), *cells])
        if body:
            out += [f"### {dimension}", "", *table([dimension, "probe", "sessions", *strategies], body), ""]
    return out


def cost_per_compaction(
    rows: Sequence[dict[str, Any]], strategies: list[str], against: str = "handoff"
) -> list[str]:
    """Per strategy, what one compaction cost: prompt and output tokens spent, model calls and seconds,
    each the mean over every compaction of every run; and the same against `against`'s, as a ratio."""
    means: dict[str, tuple[float, float, float, int]] = {}
    for s in strategies:
        done = [c for r in rows if r["strategy"] == s for c in r.get("compactions", [])]
        if not done:
            continue
        n = len(done)
        means[s] = (
            sum(c.get("spent", 0) for c in done) / n,
            sum(c.get("calls", 0) for c in done) / n,
            sum(c.get("seconds", 0.0) for c in done) / n,
            n,
        )
    base = means.get(against)
    body = []
    for s, (tokens, calls, seconds, n) in means.items():
        ratio = (
            f"{tokens / base[0]:.1f}x / {seconds / base[2]:.1f}x"
            if base and base[0] and base[2] and s != against
            else "-"
        )
        body.append([s, str(n), f"{tokens:,.0f}", f"{calls:.1f}", f"{seconds:,.1f}", ratio])
    header = [
        "strategy",
        "compactions",
        "tokens a compaction",
        "calls a compaction",
        "seconds a compaction",
        f"tokens / seconds against {against}",
    ]
    return table(header, body) if body else []
