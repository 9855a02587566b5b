"""Crash rate over time: crashes from the index, sessions from the counters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import CrashIndex, SessionCounters
from ports.errors import InvalidField
from ports.timeutil import HOUR_MS, MINUTE_MS, Time, counted_to, floor_to, last_buckets, steps, time_range, to_rfc3339

MAX_BUCKETS = 10_080  # a week of minutes
Granularity = Literal["minute", "hour"]
_STEP = {"minute": MINUTE_MS, "hour": HOUR_MS}
_DEFAULT_SPAN = {"minute": HOUR_MS, "hour": 24 * HOUR_MS}


@with_config(ConfigDict(extra="forbid"))
class Bucket(TypedDict):
    start: Time
    sessions: Annotated[int, Field(ge=0)]
    crashes: Annotated[int, Field(ge=0)]
    crashRate: Annotated[float | None, Field(
        description="crashes/sessions; null without sessions or with a report filter")]


@with_config(ConfigDict(extra="forbid"))
class Stats(TypedDict):
    series: list[Bucket]


def crash_stats(index: CrashIndex, counters: SessionCounters, sku: str, *, from_ms: int | None = None,
                to_ms: int | None = None, granularity: Granularity = "minute",
                equals: Mapping[str, str] | None = None) -> Stats:
    """Crashes and sessions per bucket. The report filters (`equals`, by index field) narrow the
    crashes; sessions carry no platform, build or crash type, so with a filter there is no crash
    rate to give (null)."""
    narrowed = dict(equals or {})
    step = _STEP[granularity]
    # by default the whole buckets of the last hour (minute) or day (hour), the current one last
    from_ms, to_ms = time_range(from_ms, to_ms, lambda to: last_buckets(to, step, _DEFAULT_SPAN[granularity]))
    start = floor_to(from_ms, step)
    if steps(start, to_ms, step) > MAX_BUCKETS:
        raise InvalidField(f"at most {MAX_BUCKETS} buckets; use a shorter range or granularity=hour", "from")
    end = counted_to(to_ms)
    crashes = index.crash_counts(sku, start, end, step, narrowed)
    sessions = counters.session_counts(sku, start, end, step)
    series: list[Bucket] = []
    for bucket in range(start, to_ms, step):
        c, s = crashes.get(bucket, 0), sessions.get(bucket, 0)
        rate = c / s if s and not narrowed else None
        series.append({"start": to_rfc3339(bucket), "sessions": s, "crashes": c, "crashRate": rate})
    return {"series": series}
