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
from ports.releases import DAY_MS, PlayerDay, ReleaseBucket, ReleaseIncrements
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


def _count(records: Sequence[LogRecord], counters: SessionCounters, log: EventLog) -> int:
    counted = 0
    for part in fresh_by_partition(records, counters, CONSUMER, log):
        envelopes = parse_each(part.records, SessionEnvelope.model_validate_json, "session")
        fresh = part.unseen(counters, CONSUMER, envelopes)
        increments: Counter[SessionBucket] = Counter()
        for e in fresh:
            for s in e.sessions:
                increments[SessionBucket(s.sku, floor_to(e.receivedAt, MINUTE_MS), s.kind)] += s.count
        counters.apply(part.checkpoint(CONSUMER, fresh), increments, release_increments(fresh))
        counted += sum(increments.values())
    return counted
