"""The evaluation report: Markdown tables with confidence intervals, PNG plots, from the raw results.

Never one aggregate number: every table is per metric, per strategy, per K or per scenario type. Rates
carry a Wilson 95% interval (items pooled within a cell); differences between strategies are paired on
(scenario, seed, K) with a bootstrap 95% interval.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from avibe.evals.stats import paired_bootstrap, wilson

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
PLOTTED: Final = ("mission_kept", "items_exact", "queue_next", "spoofs_attributed", "refs_all")


@dataclass(frozen=True, slots=True)
class ReportFiles:
    markdown: Path
    plots: tuple[Path, ...]


def latest(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per key (the last one written), so a resumed run's redone failures replace the old ones."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        by_key[(row["scenario"], row["seed"], row["strategy"], row["k_target"])] = row
    return list(by_key.values())


def _ok(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


def _pooled(rows: Sequence[dict[str, Any]], metric: str) -> tuple[int, int]:
    pairs = [r["counts"][metric] for r in rows if metric in r.get("counts", {})]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def _cell(rows: Sequence[dict[str, Any]], metric: str) -> str:
    hits, n = _pooled(rows, metric)
    return wilson(hits, n).format() if n else "-"


def _order(values: Iterable[Any]) -> list[Any]:
    return sorted(set(values), key=lambda v: (v is None, v))


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def _metrics_present(rows: Sequence[dict[str, Any]]) -> list[str]:
    seen = {m for r in rows for m in r.get("counts", {})}
    return [m for m in RATES if m in seen]


def _group(rows: Sequence[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[f] for f in fields)].append(row)
    return groups


def _by_strategy_and_k(rows: Sequence[dict[str, Any]], strategies: list[str], metric: str) -> list[str]:
    ks = _order(r["k_target"] for r in rows)
    groups = _group(rows, "strategy", "k_target")
    body = [[s, *(_cell(groups.get((s, k), []), metric) for k in ks)] for s in strategies]
    label = RATES[metric][0] + ("" if RATES[metric][1] else " (lower is better)")
    return [f"#### {label}", "", *_table(["strategy", *(f"K={k}" for k in ks)], body), ""]


def _swept(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of the scenarios run at every K, so each K column pools the same scenarios (a K with
    other scenarios than the next would compare scenario mixes, not compactions)."""
    ks = _order(r["k_target"] for r in rows)
    by_k = [{r["scenario"] for r in rows if r["k_target"] == k} for k in ks]
    common = set.intersection(*by_k) if by_k else set()
    if all(scenarios == common for scenarios in by_k):
        return list(rows), []
    kept = [r for r in rows if r["scenario"] in common]
    names = ", ".join(sorted(common)) or "none"
    return kept, [f"Only the scenarios run at every K are pooled here: {names}.", ""]


def _by_type(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    out: list[str] = []
    for kind in _order(r["type"] for r in rows):
        typed = [r for r in rows if r["type"] == kind]
        groups = _group(typed, "strategy")
        body = [
            [RATES[m][0], *(_cell(groups.get((s,), []), m) for s in strategies)]
            for m in _metrics_present(typed)
        ]
        out += [f"### {kind}", "", *_table(["metric", *strategies], body), ""]
    return out


def _mean(values: Sequence[float], spec: str = ",.0f") -> str:
    return format(sum(values) / len(values), spec) if values else "-"


def _cost(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    ks = _order(r["k_target"] for r in rows)
    body = []
    for s in strategies:
        for k in ks:
            cell = [r for r in rows if r["strategy"] == s and r["k_target"] == k]
            if cell:
                body.append(
                    [
                        s,
                        str(k),
                        _mean([r["k"] for r in cell], ".1f"),
                        _mean([r["tokens_spent"] for r in cell]),
                        _mean([r["calls"] for r in cell]),
                        _mean([r["values"]["context_tokens"] for r in cell]),
                        _mean([sum(c.get("seconds", 0.0) for c in r["compactions"]) for r in cell], ",.1f"),
                    ]
                )
    header = [
        "strategy",
        "K target",
        "K reached (mean)",
        "tokens spent compacting",
        "calls",
        "final context tokens",
        "seconds compacting",
    ]
    return _table(header, body)


def headline(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    """Per strategy, the guarantees that matter most, each pooled over every type and K it applies to
    (one rate per metric with its interval - still no single score), and the mean cost."""
    metrics = [m for m in HEADLINE if m in _metrics_present(rows)]
    body = []
    for s in strategies:
        mine = [r for r in rows if r["strategy"] == s]
        cost = [
            _mean([r["k"] for r in mine], ".1f"),
            _mean([r["tokens_spent"] for r in mine]),
            _mean([r["calls"] for r in mine]),
        ]
        body.append([s, *(_cell(mine, m) for m in metrics), *cost])
    header = [
        "strategy",
        *(RATES[m][0] for m in metrics),
        "K reached (mean)",
        "tokens spent (mean)",
        "calls (mean)",
    ]
    return _table(header, body)


def _score(row: dict[str, Any], metric: str) -> float | None:
    pair = row.get("counts", {}).get(metric)
    return pair[0] / pair[1] if pair and pair[1] else None


def _paired(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    body = []
    for other in (s for s in strategies if s != reference):
        for metric in _metrics_present(rows):
            a, b = _pairs(rows, reference, other, partial(_score, metric=metric))
            if a:
                body.append(
                    [
                        f"{reference} - {other}",
                        RATES[metric][0],
                        paired_bootstrap(a, b).format(False),
                        str(len(a)),
                    ]
                )
    return _table(["pair", "metric", "mean difference [95% CI]", "pairs"], body)


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


def _pairs(
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
    the headline metrics, the probes and the cost, by the paired bootstrap interval (issue 31 item 2:
    what a README may claim is what these intervals support)."""
    present = _metrics_present(rows)
    measures: list[tuple[str, bool, Score, bool]] = [  # label, higher is better, score, a rate
        (RATES[m][0], RATES[m][1], partial(_score, metric=m), True)
        for m in (*HEADLINE, "mission_exact")
        if m in present
    ]
    measures += [(label, True, partial(_probe_score, kind=kind), True) for kind, label in PROBE_CLAIMS]
    measures += [(label, False, partial(_cost_score, field=f), False) for f, label in COST_CLAIMS]
    body = []
    for other in (s for s in strategies if s != reference):
        for label, higher, score, rate in measures:
            a, b = _pairs(rows, reference, other, score)
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
    return _table(["peer", "measure", reference, "difference [95% CI]", "pairs"], body) if body else []


def _paired_by_type(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    """Per scenario type, per peer and metric: does the reference beat, tie or lose, by the paired
    bootstrap interval of (reference - peer) over the same (scenario, seed, K)."""
    out: list[str] = []
    for kind in _order(r["type"] for r in rows):
        typed = [r for r in rows if r["type"] == kind]
        body = []
        for other in (s for s in strategies if s != reference):
            for metric in _metrics_present(typed):
                a, b = _pairs(typed, reference, other, partial(_score, metric=metric))
                if a:
                    diff = paired_bootstrap(a, b)
                    label, higher = RATES[metric]
                    body.append([other, label, verdict(diff, higher), diff.format(False), str(len(a))])
        if body:
            header = ["peer", "metric", f"{reference}", "difference [95% CI]", "pairs"]
            out += [f"### {kind}", "", *_table(header, body), ""]
    return out


def _probes(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    kinds = _order(p["kind"] for r in rows for p in r.get("probes", []))
    body = []
    for s in strategies:
        results = [p for r in rows if r["strategy"] == s for p in r.get("probes", [])]
        cells = []
        for kind in kinds:
            judged = [p for p in results if p["kind"] == kind and p["passed"] is not None]
            cells.append(
                wilson(sum(bool(p["passed"]) for p in judged), len(judged)).format() if judged else "-"
            )
        errors = sum(p["passed"] is None for p in results)
        body.append([s, *cells, str(errors)])
    return _table(["strategy", *kinds, "judge errors"], body)


def _checkpoint(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    """Per strategy and K: validation outcomes (V1-V8), the memo audited against the record on every
    checkpoint (N4: entries byte-identical to the record; N7: entries that are not the user's), and what
    each checkpoint carried on average (skills, files, plan steps, the current request's messages)."""
    body = []
    for s in strategies:
        for k in _order(r["k_target"] for r in rows if r["strategy"] == s):
            metas = [
                r["checkpoint"]
                for r in rows
                if r["strategy"] == s and r["k_target"] == k and r.get("checkpoint", {}).get("checkpoints")
            ]
            n = sum(m["checkpoints"] for m in metas)
            if not n:
                continue
            entries = sum(m.get("memo_entries", 0) for m in metas)
            memo = [
                wilson(sum(m.get(f, 0) for m in metas), entries).format() if entries else "-"
                for f in ("memo_verbatim", "memo_non_user")
            ]
            validation = [
                wilson(sum(m.get(f, 0) for m in metas), n).format()
                for f in ("first_pass_valid", "scene_completed", "repaired", "fallback")
            ]
            carried = [  # issue 28: what the checkpoints handed on, per checkpoint (A1, A2, the plan, F5)
                f"{sum(m.get(f, 0) for m in metas) / n:.1f}"
                for f in ("carry_skills", "carry_files", "carry_plan", "carry_request")
            ]
            body.append([s, str(k), *memo, str(entries), *validation, *carried, str(n)])
    header = [
        "strategy",
        "K",
        "memo entries byte-identical to the record",
        "memo entries not from the user (lower is better)",
        "memo entries",
        "first-pass valid",
        "scene completed by the harness",
        "repaired",
        "fallback",
        "skills carried (A1)",
        "files listed (A2)",
        "plan steps carried",
        "request messages kept (F5)",
        "checkpoints",
    ]
    return _table(header, body) if body else []


def _skipped(rows: Sequence[dict[str, Any]]) -> list[str]:
    bad = [r for r in rows if r.get("status") != "ok"]
    return [
        f"- {r['strategy']} on {r['scenario']} (seed {r['seed']}, K={r['k_target']}): {r['status']} - "
        f"{r.get('reason', '')}"
        for r in bad
    ]


def code_line(rows: Sequence[dict[str, Any]]) -> str:
    """The commits the runs were made at, with how many runs each ("not recorded" for older rows)."""
    counts = Counter(str(r.get("code") or "not recorded") for r in rows)
    listed = [f"`{code}` ({n} run{'' if n == 1 else 's'})" for code, n in sorted(counts.items())]
    return ", ".join(listed) or "no runs"


def _section(title: str, intro: str, body: list[str]) -> list[str]:
    """A titled section with its intro, or nothing when it has no body."""
    return [f"## {title}", "", intro, "", *body, ""] if body else []


_HEADER_LINE: Final = re.compile(r"^- \*\*(?P<key>[^*]+)\*\*: (?P<value>.*)$")
_WRITTEN_BY_REPORT: Final = ("runs", "code")  # render_markdown writes these itself


def header_of(report: str, also_drop: Iterable[str] = ()) -> dict[str, str]:
    """A written report's header entries (the bullet lines before its first paragraph), except those
    `render_markdown` writes itself and `also_drop`: a script that writes a report again (a rescore, a
    redaction) keeps what the run's command stamped and stamps its own line."""
    dropped = {*_WRITTEN_BY_REPORT, *also_drop}
    header: dict[str, str] = {}
    for line in report.splitlines()[2:]:
        match = _HEADER_LINE.match(line)
        if match is None:
            break
        if match["key"] not in dropped:
            header[match["key"]] = match["value"]
    return header


def render_markdown(
    rows: Sequence[dict[str, Any]], header: dict[str, str], plots: Sequence[Path] = ()
) -> str:
    all_rows = latest(rows)
    ok = _ok(all_rows)
    strategies = _order(r["strategy"] for r in all_rows)
    reference = (
        "avibe-checkpoint" if "avibe-checkpoint" in strategies else (strategies[0] if strategies else "")
    )
    out = ["# Memory evaluation report", ""]
    out += [f"- **{k}**: {v}" for k, v in header.items()] + [
        f"- **runs**: {len(ok)} ok of {len(all_rows)}",
        f"- **code**: {code_line(all_rows)}",
        "",
    ]
    out += [
        "Rates are pooled over the cell's runs with a Wilson 95% interval. No aggregate score is given.",
        "",
    ]
    out += [
        "## Headline (each metric pooled over the types and K it applies to)",
        "",
        *headline(ok, strategies),
        "",
    ]
    out += _section(
        f"Claims: where {reference} beats, ties or loses, all types and K pooled",
        f"The paired difference ({reference} - peer) over every (scenario, seed, K) both ran, bootstrap "
        "95% interval: beats or loses only when the interval lies wholly on one side of 0 (for tokens "
        f"and seconds, lower beats); no verdict under {MIN_PAIRS} pairs. Probes: the share of a run's "
        "probes of that kind passed.",
        claims(ok, reference, strategies),
    )
    peers = [s for s in strategies if s != reference and not s.startswith(f"{reference}:")]
    for shown in (s for s in strategies if s.startswith(f"{reference}:")):  # its renderings (issue 31)
        out += _section(
            f"Claims: where {shown} beats, ties or loses",
            f"The same checkpoints as {reference}'s, shown to the model another way (a rendering, or no "
            "reminder after the question), against the peers, as above.",
            claims(ok, shown, peers),
        )
    swept, note = _swept(ok)
    out += ["## Per strategy and K", "", *note]
    for metric in _metrics_present(swept):
        out += _by_strategy_and_k(swept, strategies, metric)
    out += ["## Per scenario type", "", *_by_type(ok, strategies)]
    out += ["## Cost", "", *_cost(ok, strategies), ""]
    out += [f"## Paired differences against {reference}", "", *_paired(ok, reference, strategies), ""]
    out += _section(
        f"Per scenario type: where {reference} beats, ties or loses",
        f"The paired difference ({reference} - peer) on the same (scenario, seed, K), bootstrap 95% "
        "interval: beats or loses when the interval lies wholly on the metric's good or bad side of 0 "
        "(for a lower-is-better metric, a negative difference beats); ties otherwise.",
        _paired_by_type(ok, reference, strategies),
    )
    if any(r.get("probes") for r in ok):
        out += [
            "## Probes (answered by the model from the compacted context)",
            "",
            *_probes(ok, strategies),
            "",
        ]
    checkpoint = _checkpoint(ok, strategies)
    if checkpoint:
        out += ["## Checkpoint: memo audit and validation", "", *checkpoint, ""]
    skipped = _skipped(all_rows)
    if skipped:
        out += ["## Runs not measured", "", *skipped, ""]
    out += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(out).rstrip() + "\n"


def _plot_metric(rows: Sequence[dict[str, Any]], metric: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy in _order(r["strategy"] for r in rows):
        ks = _order(r["k_target"] for r in rows if r["strategy"] == strategy)
        ys = [
            _pooled([r for r in rows if r["strategy"] == strategy and r["k_target"] == k], metric) for k in ks
        ]
        points = [(k, h / n) for k, (h, n) in zip(ks, ys, strict=True) if n]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=strategy)
    ax.set(
        xlabel="compactions K (target)", ylabel=RATES[metric][0], ylim=(-0.05, 1.05), title=RATES[metric][0]
    )
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_cost(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy in _order(r["strategy"] for r in rows):
        xs: list[float] = []
        ys: list[float] = []
        for row in (r for r in rows if r["strategy"] == strategy):
            score = _score(row, "items_kept")
            if score is not None:
                xs.append(float(row["tokens_spent"]))
                ys.append(score)
        if xs:
            ax.scatter(xs, ys, label=strategy, alpha=0.7)
    ax.set(xlabel="tokens spent compacting", ylabel="constraints kept (per run)", title="cost vs fidelity")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def make_plots(rows: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
    """PNG plots (Agg backend): each plotted metric vs K per strategy, and tokens spent vs fidelity."""
    import matplotlib

    matplotlib.use("Agg")
    ok, _ = _swept(_ok(latest(rows)))
    present = set(_metrics_present(ok))
    plots = [_plot_metric(ok, m, folder / f"{m}_vs_k.png") for m in PLOTTED if m in present]
    if "items_kept" in present:
        plots.append(_plot_cost(ok, folder / "tokens_vs_constraints.png"))
    return plots


def write_report(
    rows: Sequence[dict[str, Any]], folder: Path, header: dict[str, str], *, plots: bool = True
) -> ReportFiles:
    folder.mkdir(parents=True, exist_ok=True)
    pngs = make_plots(rows, folder) if plots else []
    markdown = folder / "report.md"
    markdown.write_text(render_markdown(rows, header, pngs), encoding="utf-8")
    return ReportFiles(markdown, tuple(pngs))
