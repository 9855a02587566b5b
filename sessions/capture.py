"""Capture for session events: one object or a batch of up to 500, one durable log record per sku,
so an Idempotency-Key is scoped by sku as DESIGN §3.2 says."""

from __future__ import annotations

from collections import defaultdict

from adapters.ports import EventLog, OutgoingRecord, SpillStore
from core.idempotency import body_hash, new_event_id
from core.requests import Posted, validate_batch
from core.timeutil import now_ms
from core.topics import SESSIONS, publish
from sessions.model import MAX_BATCH, SessionCount, SessionEnvelope, SessionEvent, sessions_json


def capture_sessions(log: EventLog, spill: SpillStore, posted: Posted) -> int:
    events = validate_batch(SessionEvent, posted.json(), MAX_BATCH)
    by_sku: dict[str, list[SessionCount]] = defaultdict(list)
    for event in events:
        by_sku[event.sku].append(SessionCount(sku=event.sku, kind=event.kind))
    received = now_ms()
    records = []
    for sku, sessions in by_sku.items():
        event_id = new_event_id(f"sessions\x00{sku}", posted.idempotency_key)
        envelope = SessionEnvelope(eventId=event_id, receivedAt=received, sessions=sessions,
                                   bodyHash=body_hash(event_id, sessions_json(sessions)))
        records.append(OutgoingRecord(value=envelope.model_dump_json().encode(), key=event_id.encode()))
    if records:
        publish(log, spill, SESSIONS, records)
    return len(events)
