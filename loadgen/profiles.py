"""Arrival-rate profiles: requests per second at each moment of a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

RateAt = Callable[[float], float]
SPIKE_FACTOR = 10
SPIKE_WINDOW = (0.3, 0.7)
"""Where the spike profile's x10 starts and ends, as fractions of the run."""


@dataclass(frozen=True)
class Profile:
    name: str
    describe: str
    rate_at: Callable[[float, float, float], float]
    """(base rate, duration, t) → rate."""

    @property
    def mean(self) -> float:
        """The rate over the run, on average, over the base rate: how many requests it plans for
        (arrivals integrates the same, a millisecond at a time)."""
        steps = 1000
        return sum(self.rate_at(1.0, 1.0, (i + 0.5) / steps) for i in range(steps)) / steps


def _steady(base: float, _duration: float, _t: float) -> float:
    return base


def _spike(base: float, duration: float, t: float) -> float:
    """x10 in the middle 40% of the run, like the paper's Figure 2."""
    start, end = SPIKE_WINDOW
    return base * SPIKE_FACTOR if start * duration <= t < end * duration else base


def _launch(base: float, duration: float, t: float) -> float:
    """Launch day: from the base rate up to x5 over the first half, then held."""
    return base * (1 + 4 * min(1.0, t / (0.5 * duration)))


PROFILES = {p.name: p for p in (
    Profile("steady", "the base rate throughout", _steady),
    Profile("spike", f"x{SPIKE_FACTOR} in the middle 40% of the run", _spike),
    Profile("launch", "ramps to x5 over the first half, then holds", _launch),
)}


def arrivals(profile: Profile, base: float, duration: float, step: float = 0.001) -> list[float]:
    """Send times (seconds from the start) at the rate of each moment, made before the first request:
    open loop, so a slow server cannot slow the offered load. The rate is integrated a millisecond at
    a time and a request is due each time one more is owed."""
    times: list[float] = []
    owed = 0.0
    for i in range(round(duration / step)):
        t = i * step
        owed += profile.rate_at(base, duration, t) * step
        while owed >= 1 - 1e-9:
            times.append(t)
            owed -= 1
    return times
