"""Timing helpers for `blackbox bench`: percentiles over measured samples."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

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


def cpu_times() -> tuple[float, float]:
    """(all, stolen): the machine's CPU seconds so far, all of them and those its host took from it
    (`steal` in /proc/stat); zeros where the kernel does not say."""
    try:
        fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return sum(fields) / tick, fields[7] / tick


def stolen_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of the machine's CPU time its host took between two cpu_times()."""
    spent = after[0] - before[0]
    return (after[1] - before[1]) / spent if spent > 0 else 0.0
