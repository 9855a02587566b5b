"""Capture: validate a crash report, give it an eventId, and acknowledge only once it is durable
on the log (rule 1 of docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass

from crashes.model import CrashSubmission, envelope_value, report_key
from pipeline.idempotency import new_event_id
from pipeline.topics import CRASHES, publish
from ports import EventLog, OutgoingRecord, SpillStore
from ports.scopes import ANY_SKU, SkuScope
from ports.timeutil import now_ms


@dataclass(frozen=True)
class Receipt:
    event_id: str
    report_key: str


def capture_crash(log: EventLog, spill: SpillStore, submission: CrashSubmission, json_text: bytes, *,
                  idempotency_key: str | None = None, scope: SkuScope = ANY_SKU) -> Receipt:
    """`json_text` is the report as submitted, kept as its payload; its size is the report's in the
    index, which a full page is cut by before its documents are fetched (crashes.reporting)."""
    scope.check([submission.sku])
    event_id = new_event_id(f"crash\x00{submission.sku}", idempotency_key)
    key = report_key(event_id)
    publish(log, spill, CRASHES, [OutgoingRecord(
        value=envelope_value(event_id, key, now_ms(), json_text),
        key=key.encode(),
        headers=(("eventId", event_id.encode()),),
    )])
    return Receipt(event_id, key)
