"""What a report may claim (docs/eval.md): per peer, does the reference beat, tie or lose, by the paired
bootstrap 95% interval of (reference - peer) over the same (scenario, seed, K) - pooled, and per type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final

from avibe.evals.rows import HEADLINE, RATES, metrics_present, order, rate_of, table
from avibe.evals.stats import paired_bootstrap


def paired(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    body = []
    for other in (s for s in strategies if s != reference):
        for metric in metrics_present(rows):
            a, b = pairs(rows, reference, other, partial(rate_of, metric=metric))
            if a:
                body.append(
                    [
                        f"{reference} - {other}",
                        RATES[metric][0],
                        paired_bootstrap(a, b).format(False),
                        str(len(a)),
                    ]
                )
    return table(["pair", "metric", "mean difference [95% CI]", "pairs"], body)


def verdict(difference: Any, higher_is_better: bool) -> str:
    """ "beats" / "loses" when the paired interval of (reference - peer) lies wholly on one side of 0, in
    the metric's good direction; "ties" otherwise (the interval holds 0, or there is no difference)."""
    low, high = (difference.low, difference.high) if higher_is_better else (-difference.high, -difference.low)
    return "beats" if low > 0 else "loses" if high < 0 else "ties"


# what users feel besides the metrics on the context: the probes answered from it, and what it cost
PROBE_CLAIMS: Final = (("exact", "probes: exact answer"), ("next_action", "probes: next action"))
COST_CLAIMS: Final = (("tokens_spent", "tokens spent a run"), ("seconds", "compaction seconds a run"))


# below this many pairs a bootstrap interval is a few points, not an interval: no verdict is claimed
MIN_PAIRS: Final = 5


def _probe_score(row: dict[str, Any], kind: str) -> float | None:
    judged = [p for p in row.get("probes", []) if p.get("kind") == kind and p.get("passed") is not None]
    return sum(bool(p["passed"]) for p in judged) / len(judged) if judged else None


def _cost_score(row: dict[str, Any], field: str) -> float | None:
    if field == "seconds":
        return sum(float(c.get("seconds") or 0) for c in row.get("compactions", []))
    value = row.get(field)
    return float(value) if isinstance(value, int | float) else None


Score = Callable[[dict[str, Any]], float | None]


def pairs(
    rows: Sequence[dict[str, Any]], reference: str, other: str, score: Score
) -> tuple[list[float], list[float]]:
    """The reference's and the peer's scores on the same (scenario, seed, K), where both have one."""
    index = {(r["scenario"], r["seed"], r["k_target"], r["strategy"]): r for r in rows}
    a: list[float] = []
    b: list[float] = []
    for (scenario, seed, k, strategy), row in index.items():
        mate = index.get((scenario, seed, k, other))
        if strategy != reference or mate is None:
            continue
        x, y = score(row), score(mate)
        if x is not None and y is not None:
            a.append(x)
            b.append(y)
    return a, b


def claims(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    """Per peer, pooled over every (scenario, seed, K) both ran: does the reference beat, tie or lose on
    the headline metrics, the probes and the cost, by the paired bootstrap interval (docs/eval.md:
    what a README may claim is what these intervals support)."""
    present = metrics_present(rows)
    measures: list[tuple[str, bool, Score, bool]] = [  # label, higher is better, score, a rate
        (RATES[m][0], RATES[m][1], partial(rate_of, metric=m), True)
        for m in (*HEADLINE, "mission_exact")
        if m in present
    ]
    measures += [(label, True, partial(_probe_score, kind=kind), True) for kind, label in PROBE_CLAIMS]
    measures += [(label, False, partial(_cost_score, field=f), False) for f, label in COST_CLAIMS]
    body = []
    for other in (s for s in strategies if s != reference):
        for label, higher, score, rate in measures:
            a, b = pairs(rows, reference, other, score)
            if not a:
                continue
            diff = paired_bootstrap(a, b)
            shown = (
                f"{diff.estimate:+.0%} [{diff.low:+.0%}, {diff.high:+.0%}]"
                if rate
                else f"{diff.estimate:+,.0f} [{diff.low:+,.0f}, {diff.high:+,.0f}]"
            )
            said = verdict(diff, higher) if len(a) >= MIN_PAIRS else "too few pairs"
            body.append([other, label, said, shown, str(len(a))])
    return table(["peer", "measure", reference, "difference [95% CI]", "pairs"], body) if body else []


def paired_by_type(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    """Per scenario type, per peer and metric: does the reference beat, tie or lose, by the paired
    bootstrap interval of (reference - peer) over the same (scenario, seed, K)."""
    out: list[str] = []
    for kind in order(r["type"] for r in rows):
        typed = [r for r in rows if r["type"] == kind]
        body = []
        for other in (s for s in strategies if s != reference):
            for metric in metrics_present(typed):
                a, b = pairs(typed, reference, other, partial(rate_of, metric=metric))
                if a:
                    diff = paired_bootstrap(a, b)
                    label, higher = RATES[metric]
                    body.append([other, label, verdict(diff, higher), diff.format(False), str(len(a))])
        if body:
            header = ["peer", "metric", f"{reference}", "difference [95% CI]", "pairs"]
            out += [f"### {kind}", "", *table(header, body), ""]
    return out
