"""The evaluation report: Markdown tables with confidence intervals, PNG plots, from the raw results.

Never one aggregate number: every table is per metric, per strategy, per K or per scenario type. Rates
carry a Wilson 95% interval (items pooled within a cell); differences between strategies are paired on
(scenario, seed, K) with a bootstrap 95% interval.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from avibe.evals.claims import MIN_PAIRS, claims, paired, paired_by_type
from avibe.evals.plots import make_plots
from avibe.evals.report_groups import Labels, cost_per_compaction, probes_by_label
from avibe.evals.rows import (
    HEADLINE,
    RATES,
    cell,
    group,
    latest,
    metrics_present,
    ok_rows,
    order,
    swept_rows,
    table,
)
from avibe.evals.stats import wilson


@dataclass(frozen=True, slots=True)
class ReportFiles:
    markdown: Path
    plots: tuple[Path, ...]


def _by_strategy_and_k(rows: Sequence[dict[str, Any]], strategies: list[str], metric: str) -> list[str]:
    ks = order(r["k_target"] for r in rows)
    groups = group(rows, "strategy", "k_target")
    body = [[s, *(cell(groups.get((s, k), []), metric) for k in ks)] for s in strategies]
    label = RATES[metric][0] + ("" if RATES[metric][1] else " (lower is better)")
    return [f"#### {label}", "", *table(["strategy", *(f"K={k}" for k in ks)], body), ""]


def _by_type(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    out: list[str] = []
    for kind in order(r["type"] for r in rows):
        typed = [r for r in rows if r["type"] == kind]
        groups = group(typed, "strategy")
        body = [
            [RATES[m][0], *(cell(groups.get((s,), []), m) for s in strategies)]
            for m in metrics_present(typed)
        ]
        out += [f"### {kind}", "", *table(["metric", *strategies], body), ""]
    return out


def _mean(values: Sequence[float], spec: str = ",.0f") -> str:
    return format(sum(values) / len(values), spec) if values else "-"


def _cost(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    ks = order(r["k_target"] for r in rows)
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
    return table(header, body)


def headline(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    """Per strategy, the guarantees that matter most, each pooled over every type and K it applies to
    (one rate per metric with its interval - still no single score), and the mean cost."""
    metrics = [m for m in HEADLINE if m in metrics_present(rows)]
    body = []
    for s in strategies:
        mine = [r for r in rows if r["strategy"] == s]
        cost = [
            _mean([r["k"] for r in mine], ".1f"),
            _mean([r["tokens_spent"] for r in mine]),
            _mean([r["calls"] for r in mine]),
        ]
        body.append([s, *(cell(mine, m) for m in metrics), *cost])
    header = [
        "strategy",
        *(RATES[m][0] for m in metrics),
        "K reached (mean)",
        "tokens spent (mean)",
        "calls (mean)",
    ]
    return table(header, body)


def _probes(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    kinds = order(p["kind"] for r in rows for p in r.get("probes", []))
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
    return table(["strategy", *kinds, "judge errors"], body)


def _checkpoint(rows: Sequence[dict[str, Any]], strategies: list[str]) -> list[str]:
    """Per strategy and K: validation outcomes (V1-V8), the memo audited against the record on every
    checkpoint (N4: entries byte-identical to the record; N7: entries that are not the user's), and what
    each checkpoint carried on average (skills, files, plan steps, the current request's messages)."""
    body = []
    for s in strategies:
        for k in order(r["k_target"] for r in rows if r["strategy"] == s):
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
            carried = [  # what the checkpoints handed on, per checkpoint (A1, A2, the plan, F5)
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
    return table(header, body) if body else []


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


def _claims_sections(rows: Sequence[dict[str, Any]], reference: str, strategies: list[str]) -> list[str]:
    """What the reference may claim against each peer, then what each of its renderings may."""
    out = _section(
        f"Claims: where {reference} beats, ties or loses, all types and K pooled",
        f"The paired difference ({reference} - peer) over every (scenario, seed, K) both ran, bootstrap "
        "95% interval: beats or loses only when the interval lies wholly on one side of 0 (for tokens "
        f"and seconds, lower beats); no verdict under {MIN_PAIRS} pairs. Probes: the share of a run's "
        "probes of that kind passed.",
        claims(rows, reference, strategies),
    )
    peers = [s for s in strategies if s != reference and not s.startswith(f"{reference}:")]
    for shown in (s for s in strategies if s.startswith(f"{reference}:")):  # its renderings (docs/eval.md)
        out += _section(
            f"Claims: where {shown} beats, ties or loses",
            f"The same checkpoints as {reference}'s, shown to the model another way (a rendering, or no "
            "reminder after the question), against the peers, as above.",
            claims(rows, shown, peers),
        )
    return out


def render_markdown(
    rows: Sequence[dict[str, Any]],
    header: dict[str, str],
    plots: Sequence[Path] = (),
    labels: Labels | None = None,
) -> str:
    all_rows = latest(rows)
    ok = ok_rows(all_rows)
    strategies = order(r["strategy"] for r in all_rows)
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
    out += _claims_sections(ok, reference, strategies)
    swept, note = swept_rows(ok)
    out += ["## Per strategy and K", "", *note]
    for metric in metrics_present(swept):
        out += _by_strategy_and_k(swept, strategies, metric)
    out += ["## Per scenario type", "", *_by_type(ok, strategies)]
    out += ["## Cost", "", *_cost(ok, strategies), ""]
    out += _section(
        "Cost per compaction",
        "Each compaction's tokens (prompt and output, every call), model calls and seconds, the mean over "
        "every compaction of every run.",
        cost_per_compaction(ok, strategies),
    )
    out += [f"## Paired differences against {reference}", "", *paired(ok, reference, strategies), ""]
    out += _section(
        f"Per scenario type: where {reference} beats, ties or loses",
        f"The paired difference ({reference} - peer) on the same (scenario, seed, K), bootstrap 95% "
        "interval: beats or loses when the interval lies wholly on the metric's good or bad side of 0 "
        "(for a lower-is-better metric, a negative difference beats); ties otherwise.",
        paired_by_type(ok, reference, strategies),
    )
    if any(r.get("probes") for r in ok):
        out += [
            "## Probes (answered by the model from the compacted context)",
            "",
            *_probes(ok, strategies),
            "",
        ]
    out += _section(
        "Probes by what the session is",
        "The real sessions grouped by the person's language, by whether a standing request of theirs has "
        "none of the memo's rule words, by whether they revised a rule, and by whether the original "
        "transcript holds the peer's own compaction; each cell the probes of that kind passed, Wilson 95% "
        "interval, pooled over the group's sessions.",
        probes_by_label(ok, strategies, labels or {}),
    )
    checkpoint = _checkpoint(ok, strategies)
    if checkpoint:
        out += ["## Checkpoint: memo audit and validation", "", *checkpoint, ""]
    skipped = _skipped(all_rows)
    if skipped:
        out += ["## Runs not measured", "", *skipped, ""]
    out += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(out).rstrip() + "\n"


def _real_labels(rows: Sequence[dict[str, Any]]) -> Labels:
    """The real sessions' labels where the rows hold any (the manifest and truth of this tree)."""
    if not any(r.get("type") == "real" for r in rows):
        return {}
    from avibe.evals.realset import RealSessionError, session_labels

    try:
        return session_labels()
    except RealSessionError:
        return {}  # a damaged manifest is reported where it is loaded; the report goes without groups


def write_report(
    rows: Sequence[dict[str, Any]], folder: Path, header: dict[str, str], *, plots: bool = True
) -> ReportFiles:
    folder.mkdir(parents=True, exist_ok=True)
    pngs = make_plots(rows, folder) if plots else []
    markdown = folder / "report.md"
    markdown.write_text(render_markdown(rows, header, pngs, _real_labels(rows)), encoding="utf-8")
    return ReportFiles(markdown, tuple(pngs))
