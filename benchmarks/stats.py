"""Timing helpers for `blackbox bench`: percentiles over measured samples."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from loadgen.stats import percentile


def timed_ms(call: Callable[[int], object], inputs: Sequence[int]) -> list[float]:
    """Milliseconds for each call, one per input."""
    samples = []
    for value in inputs:
        start = time.perf_counter()
        call(value)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def summary_ms(samples: Sequence[float]) -> str:
    return f"{statistics.fmean(samples):.2f} / {percentile(samples, 50):.2f} / {percentile(samples, 95):.2f}"
