"""The report's PNG plots (matplotlib, Agg backend, imported only when plotting): each plotted metric
vs K per strategy, and tokens spent vs constraints kept."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from avibe.evals.rows import RATES, latest, metrics_present, ok_rows, order, pooled, rate_of, swept_rows

PLOTTED: Final = ("mission_kept", "items_exact", "queue_next", "spoofs_attributed", "refs_all")


def _plot_metric(rows: Sequence[dict[str, Any]], metric: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy in order(r["strategy"] for r in rows):
        ks = order(r["k_target"] for r in rows if r["strategy"] == strategy)
        ys = [
            pooled([r for r in rows if r["strategy"] == strategy and r["k_target"] == k], metric) for k in ks
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
    for strategy in order(r["strategy"] for r in rows):
        xs: list[float] = []
        ys: list[float] = []
        for row in (r for r in rows if r["strategy"] == strategy):
            score = rate_of(row, "items_kept")
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
    ok, _ = swept_rows(ok_rows(latest(rows)))
    present = set(metrics_present(ok))
    plots = [_plot_metric(ok, m, folder / f"{m}_vs_k.png") for m in PLOTTED if m in present]
    if "items_kept" in present:
        plots.append(_plot_cost(ok, folder / "tokens_vs_constraints.png"))
    return plots
