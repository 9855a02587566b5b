"""Capture for session events: one object or a batch of up to 500, one durable log record."""

from __future__ import annotations

from adapters.ports import EventLog, OutgoingRecord, SpillStore
from core.requests import Posted, validate_batch
from core.timeutil import now_ms
from core.topics import SESSIONS, publish
from crashes.model import new_event_id
from sessions.model import MAX_BATCH, SessionCount, SessionEnvelope, SessionEvent


def capture_sessions(log: EventLog, spill: SpillStore, posted: Posted) -> int:
    events = validate_batch(SessionEvent, posted.json(), MAX_BATCH)
    if not events:
        return 0
    event_id = new_event_id("sessions", posted.idempotency_key)
    envelope = SessionEnvelope(
        eventId=event_id,
        receivedAt=now_ms(),
        sessions=[SessionCount(sku=e.sku, kind=e.kind) for e in events],
    )
    record = OutgoingRecord(value=envelope.model_dump_json().encode(), key=event_id.encode())
    publish(log, spill, SESSIONS, [record])
    return len(events)
