"""The crash consumer's work: a batch of log records becomes documents (report bodies and, apart
from them, attachments) and index rows. Every write is idempotent by reportKey, so a redelivered
batch changes nothing (DESIGN §3.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from adapters.ports import CrashIndex, DocumentStore, EventLog, IndexEntry, LogRecord
from core.topics import dead_letter
from crashes.model import CrashEnvelope, CrashSubmission, attachment_key, decode_attachment
from crashes.signature import signature


class ReportDocument(BaseModel):
    """The report body in the document store: the payload as submitted, but for the attachment
    data, which is stored apart; each attachment's value here is null (names and key order stay)."""

    model_config = ConfigDict(strict=True)

    eventId: str
    reportKey: str
    receivedAt: int
    payload: dict[str, Any]


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def persist_crashes(
    records: Sequence[LogRecord], documents: DocumentStore, index: CrashIndex, log: EventLog, ttl_seconds: int
) -> list[IndexEntry]:
    """Returns the index entries of the persisted reports; malformed records go to the dead-letter topic."""
    rejected: list[tuple[LogRecord, str]] = []
    bodies: dict[str, bytes] = {}
    entries: list[IndexEntry] = []
    for record in records:
        try:
            envelope = CrashEnvelope.model_validate_json(record.value)
            submission = CrashSubmission.model_validate(envelope.payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            rejected.append((record, f"malformed crash record: {'.'.join(map(str, first['loc']))}: {first['msg']}"))
            continue
        payload = dict(envelope.payload)
        attachments = submission.attachments or {}
        for name, data in attachments.items():
            bodies[attachment_key(envelope.reportKey, name)] = decode_attachment(data)
        if submission.attachments is not None:
            payload["attachments"] = dict.fromkeys(attachments)
        bodies[envelope.reportKey] = ReportDocument(
            eventId=envelope.eventId, reportKey=envelope.reportKey, receivedAt=envelope.receivedAt, payload=payload
        ).model_dump_json().encode()
        entries.append(
            IndexEntry(
                report_key=envelope.reportKey,
                event_id=envelope.eventId,
                sku=submission.sku,
                received_at=envelope.receivedAt,
                size_bytes=envelope.sizeBytes,
                crash_type=submission.crashType,
                error_code=_optional_str(submission.errorCode),
                platform=submission.platform,
                build_version=submission.buildVersion,
                signature=signature(submission.stackTrace),
                attachments=tuple(attachments),
            )
        )
    dead_letter(log, rejected)
    # documents first: an index row is what makes a report visible, so its body must exist by then
    if bodies:
        documents.upsert_many(bodies, ttl_seconds)
    if entries:
        index.insert_many(entries)
    return entries
