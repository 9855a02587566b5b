"""Capture for session events: one object or a batch of up to 500, one durable log record per sku
(and key: a Sentry upload's sessions are each keyed by their sid), so an Idempotency-Key is scoped
by sku as rule 2 of docs/architecture.md says."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.idempotency import per_scope
from pipeline.topics import SESSIONS, publish
from ports import EventLog, OutgoingRecord, SpillStore
from ports.scopes import ANY_SKU, SkuScope
from ports.timeutil import now_ms
from sessions.model import SessionCount, SessionEnvelope, SessionEvent, sessions_json


def capture_sessions(log: EventLog, spill: SpillStore, events: Sequence[SessionEvent], *,
                     idempotency_key: str | None = None, scope: SkuScope = ANY_SKU) -> int:
    # players are counted per build: a session of none keeps the record (and body hash) it always had
    capture_counts(log, spill, [SessionCount(sku=e.sku, kind=e.kind, buildVersion=e.buildVersion, status=e.status,
                                             playerId=e.playerId if e.buildVersion else None) for e in events],
                   idempotency_key=idempotency_key, scope=scope)
    return len(events)


def capture_counts(log: EventLog, spill: SpillStore, counts: Sequence[SessionCount], *,
                   idempotency_key: str | None = None, scope: SkuScope = ANY_SKU) -> None:
    capture_each(log, spill, [(idempotency_key, counts)], scope=scope)


def capture_each(log: EventLog, spill: SpillStore, keyed: Sequence[tuple[str | None, Sequence[SessionCount]]], *,
                 scope: SkuScope = ANY_SKU, kind: str = "sessions") -> None:
    """Counts under keys of their own (each an event a sku), durable together. `kind`: whose keys
    they are, so that another's never make one a retry (a client's Idempotency-Key is of `sessions`)."""
    scope.check(c.sku for _, counts in keyed for c in counts)
    received = now_ms()
    records = [
        OutgoingRecord(value=SessionEnvelope(eventId=s.event_id, receivedAt=received, sessions=s.items,
                                             bodyHash=s.body_hash).model_dump_json(exclude_defaults=True).encode(),
                       key=s.event_id.encode())
        for key, counts in keyed for s in per_scope(kind, counts, lambda c: c.sku, key, sessions_json)
    ]
    if records:
        publish(log, spill, SESSIONS, records)
