"""Spike detection against a trailing baseline, on index rows with chosen receive times."""

from __future__ import annotations

import itertools

import pytest

from adapters.factory import Adapters
from adapters.settings import Settings
from crashes.spikes import MAX_MINUTES, Spike, SpikePolicy, announced, list_alerts
from lambdas import reporter
from ports import IndexEntry
from ports.errors import InvalidField
from ports.timeutil import MINUTE_MS, to_rfc3339
from tests.conftest import get

T0 = 1_790_000_000_000 - 1_790_000_000_000 % MINUTE_MS  # a minute start
POLICY = SpikePolicy(factor=3.0, baseline_minutes=30, min_crashes=20)
_keys = itertools.count()


def crashes(sku: str, minute: int, n: int) -> list[IndexEntry]:
    """n crashes received inside the given minute (counted from T0)."""
    start = T0 + minute * MINUTE_MS
    return [
        IndexEntry(report_key=f"k{next(_keys)}", event_id="e", sku=sku, received_at=start + i * 59_000 // max(n, 1),
                   size_bytes=1)
        for i in range(n)
    ]


def steady(adapters: Adapters, sku: str, per_minute: int, minutes: int) -> None:
    adapters.index.insert_many([e for m in range(minutes) for e in crashes(sku, m, per_minute)])


def alerts(adapters: Adapters, sku: str, first_minute: int, last_minute: int) -> list[dict]:
    return list_alerts(adapters.index, POLICY, sku, from_ms=T0 + first_minute * MINUTE_MS,
                       to_ms=T0 + (last_minute + 1) * MINUTE_MS)["alerts"]


def test_a_steady_rate_raises_no_alert(adapters: Adapters):
    steady(adapters, "g", per_minute=40, minutes=90)
    assert alerts(adapters, "g", 30, 89) == []


def test_a_minute_over_factor_times_the_baseline_is_an_alert(adapters: Adapters):
    steady(adapters, "g", per_minute=10, minutes=40)
    adapters.index.insert_many(crashes("g", 40, 31))  # threshold: more than 3 x 10
    adapters.index.insert_many(crashes("other", 40, 500))  # another sku's spike is not this one's
    assert alerts(adapters, "g", 30, 45) == [
        {"sku": "g", "start": to_rfc3339(T0 + 40 * MINUTE_MS), "crashes": 31, "baseline": 10.0, "threshold": 31}
    ]
    adapters.index.insert_many(crashes("h", 40, 30))  # 3 x 10 exactly is no spike
    steady(adapters, "h", per_minute=10, minutes=40)
    assert alerts(adapters, "h", 30, 45) == []


def test_a_quiet_sku_needs_min_crashes(adapters: Adapters):
    adapters.index.insert_many(crashes("g", 5, 19) + crashes("g", 6, 20))
    assert [a["start"] for a in alerts(adapters, "g", 0, 10)] == [to_rfc3339(T0 + 6 * MINUTE_MS)]


def test_a_spike_is_announced_once_by_the_batch_that_crosses_the_threshold(adapters: Adapters):
    steady(adapters, "g", per_minute=2, minutes=30)
    burst = crashes("g", 30, 50)
    announced = []
    for batch in (burst[:15], burst[15:25], burst[25:]):
        adapters.index.insert_many(batch)
        announced.append([(s.sku, s.minute, s.crashes) for s in to_announce(adapters, batch)])
    assert announced == [[], [("g", T0 + 30 * MINUTE_MS, 25)], []]


def to_announce(adapters: Adapters, batch: list[IndexEntry]) -> list[Spike]:
    return list(announced(adapters.index, adapters.issues, POLICY, batch, T0))


@pytest.mark.parametrize("each", [20, 12])
def test_consumers_indexing_one_minute_at_once_announce_its_spike_once(adapters: Adapters, each: int):
    """Found from outside, with two consumers of one group: a batch announced a spike it found its
    own reports had pushed over the threshold, read after both had written. With 20 each, each
    found the other had crossed it (none announced); with 12 each, each found it had (two)."""
    steady(adapters, "g", per_minute=2, minutes=30)
    first, second = crashes("g", 30, each), crashes("g", 30, each)
    adapters.index.insert_many(first)
    adapters.index.insert_many(second)
    told = to_announce(adapters, first) + to_announce(adapters, second)
    assert [(s.sku, s.minute, s.crashes) for s in told] == [("g", T0 + 30 * MINUTE_MS, 2 * each)]
    # and the next batch of that minute, of a consumer cut off before it announced, still would
    adapters.index.insert_many(crashes("h", 30, 25))
    assert [s.sku for s in to_announce(adapters, crashes("h", 30, 1))] == ["h"]


def test_alerts_by_default_scan_the_last_hour_whole(adapters: Adapters):
    """Found from outside: a `to` on a minute's start scanned 59 minutes, not the first of the hour."""
    adapters.index.insert_many(crashes("g", 0, 25))
    found = list_alerts(adapters.index, POLICY, "g", to_ms=T0 + 60 * MINUTE_MS)["alerts"]
    assert [a["start"] for a in found] == [to_rfc3339(T0)]


def test_alert_queries_are_validated(adapters: Adapters):
    status, body = get(reporter.handler, "/v1/alerts")
    assert (status, body["error"], body["field"]) == (400, "missing_field", "sku")
    with pytest.raises(InvalidField):
        list_alerts(adapters.index, POLICY, "g", from_ms=0, to_ms=T0)  # more than a week
    with pytest.raises(InvalidField):
        list_alerts(adapters.index, POLICY, "g", from_ms=10, to_ms=5)
    # a week of minutes, and not a partial minute more (as the stats' buckets, found there from outside)
    week = T0 + MAX_MINUTES * MINUTE_MS
    assert list_alerts(adapters.index, POLICY, "g", from_ms=T0, to_ms=week) == {"alerts": []}
    with pytest.raises(InvalidField):
        list_alerts(adapters.index, POLICY, "g", from_ms=T0, to_ms=week + MINUTE_MS - 1)


def test_policy_from_settings_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BLACKBOX_SPIKES__FACTOR", "5")
    monkeypatch.setenv("BLACKBOX_SPIKES__MIN_CRASHES", "3")
    assert Settings().spikes == SpikePolicy(factor=5, baseline_minutes=30, min_crashes=3)
    assert Settings().spikes.threshold(0.0) == 6 and Settings().spikes.threshold(2.0) == 11
