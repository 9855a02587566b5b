"""Spike detection: crashes per minute per sku against a trailing baseline, the mean of the
minutes before. `GET /v1/alerts` recomputes spikes from the index, so it is exact however often
a batch was redelivered; the crash consumer announces (log line and metric) each spiking minute
once, whichever consumer's batch first finds it over the threshold."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import CrashIndex, IndexEntry
from ports.errors import InvalidField
from ports.issues import IssueStore
from ports.timeutil import HOUR_MS, MINUTE_MS, Time, floor_to, last_buckets, steps, time_range, to_rfc3339

MAX_MINUTES = 10_080  # a week


class SpikePolicy(BaseModel):
    """A minute is a spike when it has at least `min_crashes` crashes and more than `factor` times
    the baseline; a baseline under one crash a minute counts as one, so a quiet sku needs
    `min_crashes` to alert."""

    factor: float = Field(default=3.0, gt=1.0)
    baseline_minutes: int = Field(default=30, ge=1, le=1440)
    min_crashes: int = Field(default=20, ge=1)

    def threshold(self, baseline: float) -> int:
        """The smallest count that is a spike."""
        return max(self.min_crashes, math.floor(self.factor * max(baseline, 1.0)) + 1)


@with_config(ConfigDict(extra="forbid"))
class Alert(TypedDict):
    sku: str
    start: Time
    crashes: int
    baseline: float
    threshold: int


@with_config(ConfigDict(extra="forbid"))
class Alerts(TypedDict):
    alerts: list[Alert]


@dataclass(frozen=True)
class Spike:
    sku: str
    minute: int
    crashes: int
    baseline: float
    threshold: int

    def body(self) -> Alert:
        return {
            "sku": self.sku,
            "start": to_rfc3339(self.minute),
            "crashes": self.crashes,
            "baseline": round(self.baseline, 3),
            "threshold": self.threshold,
        }


def spikes_in(index: CrashIndex, policy: SpikePolicy, sku: str, minutes: Iterable[int]) -> list[Spike]:
    """The spikes among `minutes` (minute starts), from one count query over them and their baselines."""
    wanted = sorted(set(minutes))
    if not wanted:
        return []
    window = policy.baseline_minutes * MINUTE_MS
    counts = index.crash_counts(sku, wanted[0] - window, wanted[-1] + MINUTE_MS, MINUTE_MS)
    found = []
    for minute in wanted:
        crashes = counts.get(minute, 0)
        before = sum(counts.get(minute - back, 0) for back in range(MINUTE_MS, window + 1, MINUTE_MS))
        baseline = before / policy.baseline_minutes
        threshold = policy.threshold(baseline)
        if crashes >= threshold:
            found.append(Spike(sku, minute, crashes, baseline, threshold))
    return found


def list_alerts(index: CrashIndex, policy: SpikePolicy, sku: str, *, from_ms: int | None = None,
                to_ms: int | None = None) -> Alerts:
    from_ms, to_ms = time_range(from_ms, to_ms, lambda to: last_buckets(to, MINUTE_MS, HOUR_MS))
    first = floor_to(from_ms, MINUTE_MS)
    if steps(first, to_ms, MINUTE_MS) > MAX_MINUTES:
        raise InvalidField(f"at most {MAX_MINUTES} minutes; use a shorter range", "from")
    spikes = spikes_in(index, policy, sku, range(first, to_ms, MINUTE_MS))
    return {"alerts": [spike.body() for spike in spikes]}


def announced(index: CrashIndex, issues: IssueStore, policy: SpikePolicy, persisted: Sequence[IndexEntry],
              now: int) -> Iterator[Spike]:
    """The spikes of the minutes these just-persisted entries fall in, that this caller claims the
    announcement of (IssueStore.announce), each as it is claimed, to be announced then: a store
    failing at the next leaves none claimed and untold. Each is announced once, by the first batch
    of any consumer to find its minute over the threshold once its own reports are in, rather than
    with every later batch of the minute (and by a later one where a consumer cut off after its
    write announced nothing)."""
    minutes_by_sku: dict[str, set[int]] = {}
    for entry in persisted:
        minutes_by_sku.setdefault(entry.sku, set()).add(floor_to(entry.received_at, MINUTE_MS))
    for sku, minutes in minutes_by_sku.items():
        for spike in spikes_in(index, policy, sku, minutes):
            if issues.announce(f"crash-spike:{sku}:{spike.minute}", now):
                yield spike
