"""The session counter: per sku, minute and kind. Effectively-once: each partition's last applied
offset is stored in the same transaction as the counts, and records at or below it are skipped
(DESIGN §3.4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from adapters.ports import EventLog, LogRecord, SessionBucket, SessionCounters
from core.offsets import fresh_by_partition
from core.timeutil import MINUTE_MS, floor_to
from core.topics import parse_or_dead_letter
from sessions.model import SessionEnvelope

CONSUMER = "session-counter"


def count_sessions(records: Sequence[LogRecord], counters: SessionCounters, log: EventLog) -> int:
    """Returns how many sessions were newly counted."""
    counted = 0
    for part in fresh_by_partition(records, lambda tp: counters.applied_offset(CONSUMER, tp)):
        envelopes = parse_or_dead_letter(log, part.records, SessionEnvelope.model_validate_json, "session")
        events = part.unseen(counters, CONSUMER, envelopes)
        increments: Counter[SessionBucket] = Counter(
            SessionBucket(s.sku, floor_to(e.receivedAt, MINUTE_MS), s.kind) for e in events for s in e.sessions
        )
        counters.apply(part.checkpoint(CONSUMER, events), increments)
        counted += sum(increments.values())
    return counted
