"""Percentiles over measured samples, for the load generator's report and the benchmarks."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(samples: Sequence[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
