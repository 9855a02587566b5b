"""Release health on MariaDB, in one run: the session counter's throughput with release counting
(sessions with a build, an outcome and a player) against the same sessions without (the counting of
before), and a build's release-health answer (GET /v1/releases/{build}) as builds and sessions grow."""

from __future__ import annotations

import itertools
import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from adapters.factory import Adapters, build, migrate
from benchmarks.isolation import isolated
from benchmarks.stats import summary_ms, timed_ms
from crashes.releases import release_health
from pipeline.topics import SESSIONS
from ports import LogRecord
from ports.timeutil import now_ms
from sessions.counting import count_sessions

Progress = Callable[[str], None]
SKU = "bench:pc"
# a request's worth: the counter's records as batched POSTs make them
PER_RECORD = 500
PLAYERS = 100_000
WEEK_MS = 7 * 86_400_000


@dataclass(frozen=True)
class Plan:
    counted: int
    boards: tuple[tuple[int, int], ...]
    """(builds, sessions) of each release-health row."""
    queries: int

    @staticmethod
    def for_run(quick: bool) -> Plan:
        if quick:
            return Plan(20_000, ((1, 10_000), (50, 10_000)), 20)
        return Plan(100_000, ((1, 100_000), (50, 100_000), (500, 100_000), (50, 1_000_000)), 100)


def _records(sku: str, sessions: int, builds: int, rng: random.Random, offsets: itertools.count[int], *,
             topic: str, released: bool, now: int) -> list[LogRecord]:
    """Sessions over the last week, PER_RECORD a record; `released`: each of a build (the newer the
    more adopted), an outcome (1 in 20 crashed) and a player."""
    records = []
    for start in range(0, sessions, PER_RECORD):
        received = now - rng.randrange(WEEK_MS)
        batch = [{"sku": sku, "kind": "client", **({
            "buildVersion": f"1.{min(builds - 1, int(builds * rng.random() ** 0.5))}",
            "status": "crashed" if rng.random() < 0.05 else "ok",
            "playerId": f"p{rng.randrange(PLAYERS)}"} if released else {})}
            for _ in range(min(PER_RECORD, sessions - start))]
        records.append(LogRecord(topic, 0, next(offsets), json.dumps({
            "eventId": str(uuid.uuid4()), "receivedAt": received, "sessions": batch}).encode(), sku.encode(), (), 0))
    return records


def _counted(a: Adapters, records: list[LogRecord]) -> float:
    """Sessions counted a second, 20 records a batch (the poller's)."""
    start = time.perf_counter()
    counted = sum(count_sessions(records[i : i + 20], a.counters, a.log) for i in range(0, len(records), 20))
    return counted / (time.perf_counter() - start)


def run(plan: Plan, progress: Progress) -> list[str]:
    with isolated("services") as settings:
        migrate(settings)
        a = build(settings)
        try:
            rng = random.Random(7)
            now = now_ms()
            progress(f"releases: counting {plan.counted:,} sessions, with builds and without")
            without = _counted(a, _records("bench:plain", plan.counted, 1, rng, itertools.count(),
                                           topic=f"{SESSIONS}-plain", released=False, now=now))
            with_builds = _counted(a, _records("bench:released", plan.counted, 50, rng, itertools.count(),
                                               topic=f"{SESSIONS}-released", released=True, now=now))
            rows = []
            for number, (builds, sessions) in enumerate(plan.boards):
                sku = f"bench:{number}"
                progress(f"releases: loading {sessions:,} sessions of {builds} builds")
                _counted(a, _records(sku, sessions, builds, rng, itertools.count(), topic=f"{SESSIONS}-{number}",
                                     released=True, now=now))
                names = [f"1.{rng.randrange(builds)}" for _ in range(plan.queries)]
                found = [b for b in names if a.counters.build(sku, b) is not None] or ["1.0"]
                progress(f"releases: {plan.queries} release-health answers, {builds} builds")
                cells = summary_ms(timed_ms(lambda i, s=sku, f=found: release_health(  # type: ignore[misc]
                    a.index, a.counters, s, f[i % len(f)], interval="hour"), range(plan.queries)))
                rows.append(f"| {builds:,} | {sessions:,} | {cells} |")
        finally:
            a.close()
    return [
        "## Release health",
        "",
        "On MariaDB (`services`). The session counter on records of 500 sessions, as batched POSTs make them, "
        "20 records a batch: sessions with a build, an outcome and a player (release counting: sessions by "
        "build, minute and outcome; builds; players by build and day, exact to 1,000 a day, then a "
        "HyperLogLog sketch) against the same number without a build (the counting of before).",
        "",
        "| sessions counted per second | without builds | with builds (50, a player each) | with / without |",
        "|---|---:|---:|---:|",
        f"| session counter | {without:,.0f} | {with_builds:,.0f} | {with_builds / without:.2f}x |",
        "",
        "A build's release health (`GET /v1/releases/{build}`, the last week by hour: its figures, the previous "
        "build's, and 168 points), sessions spread over the week, builds adopted the newer the more (ms: mean / "
        "p50 / p95):",
        "",
        "| builds | sessions | release health |",
        "|---:|---:|---:|",
        *rows,
        "",
    ]
