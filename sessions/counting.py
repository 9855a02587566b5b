"""The session counter: per sku, minute and kind, and release health (ports.releases).
Effectively-once: each partition's last applied offset is stored in the same transaction as the
counts, and records at or below it are skipped (rule 4 of docs/architecture.md); a record whose value no store takes
goes to the dead letters alone (rule 8 of docs/architecture.md)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from pipeline.failures import land_per_partition
from pipeline.offsets import fresh_by_partition, pass_over
from pipeline.topics import parse_each
from ports import EventLog, LogRecord, SessionBucket, SessionCounters
from ports.issues import build_order
from ports.releases import DAY_MS, MAX_BUILDS, PlayerDay, ReleaseBucket, ReleaseCounts, ReleaseIncrements
from ports.telemetry import logger
from ports.timeutil import MINUTE_MS, floor_to
from sessions.model import SessionEnvelope

CONSUMER = "session-counter"


def count_sessions(records: Sequence[LogRecord], counters: SessionCounters, log: EventLog) -> int:
    """Returns how many sessions were newly counted."""
    return sum(land_per_partition(
        records, lambda part: _count(part, counters, log), log,
        lambda record: pass_over(record, counters, CONSUMER, log, lambda checkpoint: counters.apply(checkpoint, {})),
    ))


def release_increments(envelopes: Sequence[SessionEnvelope]) -> ReleaseIncrements:
    """The sessions of a build by minute and outcome (ok when not said), and its players by UTC day:
    all, and those whose session crashed."""
    sessions: Counter[ReleaseBucket] = Counter()
    players: defaultdict[PlayerDay, set[str]] = defaultdict(set)
    for e in envelopes:
        for s in e.sessions:
            if s.buildVersion is None:
                continue
            status = s.status or "ok"
            sessions[ReleaseBucket(s.sku, s.buildVersion, floor_to(e.receivedAt, MINUTE_MS), status)] += s.count
            if s.playerId is not None:
                day = floor_to(e.receivedAt, DAY_MS)
                players[PlayerDay(s.sku, s.buildVersion, day, False)].add(s.playerId)
                if status == "crashed":
                    players[PlayerDay(s.sku, s.buildVersion, day, True)].add(s.playerId)
    return ReleaseIncrements(dict(sessions), {day: frozenset(ids) for day, ids in players.items()})


def within_bound(releases: ReleaseIncrements, counts: ReleaseCounts) -> ReleaseIncrements:
    """The release counts without those of the new builds a sku has no room for (MAX_BUILDS): of a
    batch's new builds, the first in build order are taken, and the sessions of the others count
    with no build. Read apart from the counter's transaction: a batch tried again may decide
    otherwise, and counts once all the same."""
    named: defaultdict[str, set[str]] = defaultdict(set)
    for bucket in releases.sessions:
        named[bucket.sku].add(bucket.build)
    left_out: set[tuple[str, str]] = set()
    for sku, builds in named.items():
        held = counts.build_count(sku)
        if held + len(builds) <= MAX_BUILDS:
            continue
        known = counts.known_builds(sku, sorted(builds))
        new = sorted(builds - known, key=lambda build: (build_order(build), build))
        left_out.update((sku, build) for build in new[max(0, MAX_BUILDS - held):])
    if not left_out:
        return releases
    logger.warning("builds past a sku's bound counted with no build", extra={
        "bound": MAX_BUILDS, "builds": sorted(left_out)[:10], "leftOut": len(left_out)})
    return ReleaseIncrements(
        {b: n for b, n in releases.sessions.items() if (b.sku, b.build) not in left_out},
        {day: ids for day, ids in releases.players.items() if (day.sku, day.build) not in left_out})


def _count(records: Sequence[LogRecord], counters: SessionCounters, log: EventLog) -> int:
    counted = 0
    for part in fresh_by_partition(records, counters, CONSUMER, log):
        envelopes = parse_each(part.records, SessionEnvelope.model_validate_json, "session")
        fresh = part.unseen(counters, CONSUMER, envelopes)
        increments: Counter[SessionBucket] = Counter()
        for e in fresh:
            for s in e.sessions:
                increments[SessionBucket(s.sku, floor_to(e.receivedAt, MINUTE_MS), s.kind)] += s.count
        counters.apply(part.checkpoint(CONSUMER, fresh), increments,
                       within_bound(release_increments(fresh), counters))
        counted += sum(increments.values())
    return counted
