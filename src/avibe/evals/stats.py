"""Confidence intervals: Wilson for rates, paired bootstrap for differences between strategies."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Interval:
    estimate: float
    low: float
    high: float
    n: int

    def format(self, percent: bool = True) -> str:
        if self.n == 0:
            return "-"
        if percent:
            return f"{self.estimate:.0%} [{self.low:.0%}, {self.high:.0%}]"
        return f"{self.estimate:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def wilson(hits: int, n: int, z: float = Z95) -> Interval:
    """The Wilson score interval for hits/n (good at 0%, 100% and small n, unlike the normal one)."""
    if n <= 0:
        return Interval(0.0, 0.0, 0.0, 0)
    if not 0 <= hits <= n:
        raise ValueError(f"hits must be within 0..n, got {hits}/{n}")
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # rounding can put a bound a hair past the estimate at 0% or 100%: clamp it back
    return Interval(p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half)), n)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, iterations: int = 2000, seed: int = 0, level: float = 0.95
) -> Interval:
    """Mean of a - b over paired observations (same scenario, seed, K) with a percentile bootstrap
    interval; deterministic for a given seed."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    n = len(a)
    if n == 0:
        return Interval(0.0, 0.0, 0.0, 0)
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(iterations))
    tail = (1 - level) / 2
    low, high = means[int(tail * (iterations - 1))], means[int((1 - tail) * (iterations - 1))]
    return Interval(sum(diffs) / n, low, high, n)
