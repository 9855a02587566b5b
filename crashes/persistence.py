"""The crash consumer's work: a batch of log records becomes documents (report bodies and, apart
from them, attachments) and index rows. Every write is idempotent by reportKey, so a redelivered
batch changes nothing (rule 3 of docs/architecture.md); the first report under a key is kept, and another body under
a reused key goes to the dead letters (rule 9 of docs/architecture.md), as does a record no store takes (rule 8). A
report with a minidump is indexed `pending` and its walk asked of the processor (crashes.processing).
The issues (ports.issues) see each new report before it is indexed: a batch cut off after the index
write is redelivered with its keyed reports skipped as retries, so seeing them after it could miss
them; seeing one twice changes nothing. An ignore for a number of reports counts them after the
write, which a redelivery finds holding them (cut off just before, it ends at the group's next)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from crashes.grouping import Groupings
from crashes.model import CrashEnvelope, CrashSubmission, ReportDocument, attachment_key, decode_attachment
from crashes.processing import minidump_of, walk_request
from crashes.signature import signature
from pipeline.failures import land
from pipeline.idempotency import conflicts, retriable
from pipeline.offsets import IDEMPOTENCY_CONFLICT
from pipeline.topics import MINIDUMPS, Refused, parse_each
from ports import CrashIndex, DocumentStore, EventLog, IndexEntry, LogRecord
from ports.issues import Crash, IssueStore
from ports.timeutil import now_ms


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def persist_crashes(
    records: Sequence[LogRecord], documents: DocumentStore, index: CrashIndex, log: EventLog, ttl_seconds: int,
    *, issues: IssueStore | None = None, groupings: Groupings | None = None,
    on_indexed: Callable[[list[IndexEntry]], None] | None = None,
) -> list[IndexEntry]:
    """Returns the index entries of the reports this call indexed, grouped by their sku's grouping
    (the default without `groupings`): not those a delivery before it indexed. `on_indexed` has
    each write's entries as soon as it is made, before anything after it can fail, so that what it
    tells of them (a spike they start) is told once, also when the batch is delivered again; it
    must not raise, as the rows are written by then."""
    persisted = land(records, lambda part: _persist(part, documents, index, log, ttl_seconds, issues=issues,
                                                    groupings=groupings, on_indexed=on_indexed), log)
    return [entry for entries in persisted for entry in entries]


def _signature(sku: str, stack_trace: str | None, groupings: Groupings | None) -> str | None:
    if groupings is None:
        return signature(stack_trace)
    grouping = groupings(sku)
    return grouping.group(signature(stack_trace, grouping.rules))


def _parse(value: bytes) -> tuple[CrashEnvelope, CrashSubmission]:
    envelope = CrashEnvelope.model_validate_json(value)
    return envelope, CrashSubmission.model_validate(envelope.payload)


def _persist(
    records: Sequence[LogRecord], documents: DocumentStore, index: CrashIndex, log: EventLog, ttl_seconds: int,
    *, issues: IssueStore | None, groupings: Groupings | None, on_indexed: Callable[[list[IndexEntry]], None] | None,
) -> list[IndexEntry]:
    parsed = parse_each(records, _parse, "crash")
    # a keyed report (an Idempotency-Key) may be here already: a retry is skipped, another body
    # under the same key is refused; the first one's documents are never written over
    keyed = [envelope.reportKey for envelope, _ in parsed if retriable(envelope.eventId)]
    first_hashes = index.body_hashes(keyed) if keyed else {}
    new_hashes: dict[str, str | None] = {}
    bodies: dict[str, bytes] = {}
    entries: list[IndexEntry] = []
    # report key → its minidump: asked to be walked once the report is indexed
    minidumps: dict[str, str] = {}
    for envelope, submission in parsed:
        key = envelope.reportKey
        attachments = {name: decode_attachment(data) for name, data in (submission.attachments or {}).items()}
        if (minidump := minidump_of(attachments)) is not None:
            # a retry too: the first may have been indexed by a batch cut off before it asked
            minidumps[key] = minidump
        if key in first_hashes:
            if conflicts(first_hashes[key], envelope.bodyHash):
                raise Refused(f"{IDEMPOTENCY_CONFLICT}: report {key} was accepted before with another body under "
                              "the same Idempotency-Key; the first is kept")
            continue
        if retriable(envelope.eventId):
            first_hashes[key] = new_hashes[key] = envelope.bodyHash
        payload = dict(envelope.payload)
        for name, data in attachments.items():
            bodies[attachment_key(envelope.reportKey, name)] = data
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
                signature=_signature(submission.sku, submission.stackTrace, groupings),
                attachments=tuple(attachments),
                processing="pending" if minidump is not None else None,
                player_id=submission.playerId,
            )
        )
    # documents first: an index row is what makes a report visible, so its body must exist by then
    if bodies:
        documents.upsert_many(bodies, ttl_seconds)
    crashes = [Crash(e.sku, e.signature, e.build_version, e.received_at) for e in entries if e.signature is not None]
    if issues is not None and crashes:
        issues.observe(crashes, now_ms())
    indexed = index.insert_many(entries, new_hashes) if entries else []
    if indexed and on_indexed is not None:
        on_indexed(indexed)
    if issues is not None and crashes:
        issues.counted(crashes)
    # after the index: the processor updates the row, which must be there
    if minidumps:
        log.publish(MINIDUMPS, [walk_request(key, name) for key, name in minidumps.items()])
    return indexed
