"""The SQL the index and counters share on SQLite and MySQL, written with `?` placeholders
(`pyformat` turns them into PyMySQL's)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ports import (
    Applied,
    Checkpoint,
    CrashGroup,
    IndexedReport,
    IndexEntry,
    OffsetConflict,
    ReportFilter,
    SkuSeen,
)

# IndexEntry's fields are the index's columns (its attachments, JSON in one): a field added there is
# a column here, once a migration (adapters/sql/shared/) adds it
ENTRY_COLUMNS = tuple(f.name for f in fields(IndexEntry) if f.name != "attachments")
# written with the row, not read back with it: only a consumer compares it, by body_hashes()
BODY_HASH = "body_hash"
INSERT_COLUMNS = ("report_id", "submit_time", *ENTRY_COLUMNS, "attachments")
SELECT_REPORTS = f"SELECT {', '.join(INSERT_COLUMNS)} FROM reports"

SESSION_COUNTS = (
    "SELECT minute - minute % ? AS bucket, SUM(count) FROM session_counts "
    "WHERE sku = ? AND minute >= ? AND minute < ? GROUP BY bucket"
)
APPLIED_OFFSET = "SELECT applied, fingerprint FROM applied_offsets WHERE consumer = ? AND topic_partition = ?"
# retention (DESIGN §3.6): what the purge job deletes, oldest first
PURGE_REPORTS = "DELETE FROM reports WHERE submit_time < ?"
PURGE_COUNTERS = (
    "DELETE FROM session_counts WHERE minute < ?",
    "DELETE FROM applied_events WHERE applied_at < ?",
    "DELETE FROM applied_ranges WHERE applied_at < ?",
)


def applied(row: Any) -> Applied:
    """A row of APPLIED_OFFSET, or None."""
    return Applied(-1, None) if row is None else Applied(int(row[0]), row[1])


def check_offset(row: Any, checkpoint: Checkpoint) -> None:
    """The compare of compare-and-set: the stored offset (row of APPLIED_OFFSET) must be the expected one."""
    if (-1 if row is None else row[0]) != checkpoint.expected_offset:
        raise OffsetConflict(
            f"{checkpoint.consumer} {checkpoint.topic_partition}: offset moved past {checkpoint.expected_offset}"
        )


def seen_events(consumer: str, event_ids: Sequence[str]) -> tuple[str, list[str]]:
    marks = ", ".join("?" * len(event_ids)) or "NULL"
    return (f"SELECT event_id, body_hash FROM applied_events WHERE consumer = ? AND event_id IN ({marks})",
            [consumer, *event_ids])


def applied_events(checkpoint: Checkpoint, applied_at: int) -> list[tuple[str, str, int, str | None]]:
    """Rows of applied_events (consumer, event_id, applied_at, body_hash) for a checkpoint."""
    return [(checkpoint.consumer, event_id, applied_at, body_hash) for event_id, body_hash in checkpoint.events.items()]


def covered_query(consumer: str, topic_partition: str, offsets: Sequence[int]) -> tuple[str, list[Any]]:
    """The stored ranges that overlap from the least to the greatest of `offsets` (none for none)."""
    return ("SELECT first_offset, last_offset FROM applied_ranges "
            "WHERE consumer = ? AND topic_partition = ? AND first_offset <= ? AND last_offset >= ?",
            [consumer, topic_partition, max(offsets, default=-1), min(offsets, default=0)])


def covered(rows: Iterable[tuple[Any, Any]], offsets: Sequence[int]) -> set[int]:
    """Those of `offsets` inside one of the ranges of covered_query."""
    ranges = [(int(first), int(last)) for first, last in rows]
    return {offset for offset in offsets if any(first <= offset <= last for first, last in ranges)}


Statement = tuple[str, tuple[Any, ...]]


def applied_range(checkpoint: Checkpoint, applied_at: int) -> tuple[Statement, Statement]:
    """The statements that store the offsets a checkpoint covers: the first extends the range that
    ends right before them (so a partition read without a gap stays one row, and a replay's lookup
    reads few), and when it changed no row, the second adds one. REPLACE: a row that starts at the
    same offset, left by a log that was reset without deleting its ranges, gives way (ForeignOffset
    says to delete them with the offset)."""
    c = checkpoint
    first = c.new_offset if c.first_offset is None else c.first_offset
    return (
        ("UPDATE applied_ranges SET last_offset = ?, applied_at = ? "
         "WHERE consumer = ? AND topic_partition = ? AND last_offset = ?",
         (c.new_offset, applied_at, c.consumer, c.topic_partition, first - 1)),
        ("REPLACE INTO applied_ranges (consumer, topic_partition, first_offset, last_offset, applied_at) "
         "VALUES (?, ?, ?, ?, ?)",
         (c.consumer, c.topic_partition, first, c.new_offset, applied_at)),
    )


def body_hashes(table: str, report_keys: Sequence[str]) -> tuple[str, list[str]]:
    marks = ", ".join("?" * len(report_keys)) or "NULL"
    return f"SELECT report_key, body_hash FROM {table} WHERE report_key IN ({marks})", list(report_keys)


def pyformat(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


def entry_values(entry: IndexEntry, report_id: int | None, submit_time: int) -> tuple[Any, ...]:
    """Values in INSERT_COLUMNS order; report_id None lets the database assign it."""
    return (report_id, submit_time, *(getattr(entry, c) for c in ENTRY_COLUMNS), json.dumps(list(entry.attachments)))


def report_from_row(row: Iterable[Any]) -> IndexedReport:
    report_id, submit_time, *fields, attachments = row
    entry = IndexEntry(**dict(zip(ENTRY_COLUMNS, fields, strict=True)), attachments=tuple(json.loads(attachments)))
    return IndexedReport(int(report_id), int(submit_time), entry)


def _equal_to(equals: Mapping[str, str], clauses: list[str], params: list[Any]) -> None:
    """Adds the exact-match filters (IndexEntry field → value) to a WHERE clause's parts."""
    for name, value in sorted(equals.items()):
        if name not in ENTRY_COLUMNS:  # a name goes into the statement: only a column's
            raise ValueError(f"not a column of the index: {name}")
        # MySQL's utf8mb4_bin pads the shorter side with spaces ('pc' = 'pc '); at equal lengths
        # (bytes there, characters in SQLite) both engines compare exactly
        clauses.append(f"{name} = ? AND LENGTH({name}) = LENGTH(?)")
        params += [value, value]


def find_query(query: ReportFilter, sku_order_index: str) -> tuple[str, list[Any]]:
    """`sku_order_index` is the engine's hint for the (sku, report_id) index, read forwards or
    backwards. Left to choose, MySQL walked the primary key through other skus' reports for a small
    LIMIT, or read every report of the sku to sort them; SQLite sorted them all."""
    clauses = ["sku = ?"]
    params: list[Any] = [query.sku]
    if query.after_id is not None:
        clauses.append("report_id < ?" if query.newest_first else "report_id > ?")
        params.append(query.after_id)
    if query.from_ms is not None:
        clauses.append("submit_time >= ?")
        params.append(query.from_ms)
    if query.to_ms is not None:
        clauses.append("submit_time < ?")
        params.append(query.to_ms)
    _equal_to(query.equals, clauses, params)
    direction = "DESC" if query.newest_first else "ASC"
    sql = (f"{SELECT_REPORTS} {sku_order_index} WHERE {' AND '.join(clauses)} "
           f"ORDER BY report_id {direction} LIMIT ? OFFSET ?")
    return sql, [*params, query.limit, query.offset]


def crash_groups_query(
    sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None
) -> tuple[str, list[Any]]:
    clauses = ["sku = ?", "received_at >= ?", "received_at < ?", "signature IS NOT NULL"]
    params: list[Any] = [sku, from_ms, to_ms]
    _equal_to(equals or {}, clauses, params)
    sql = (
        "SELECT signature, COUNT(*) AS n, MIN(received_at), MAX(received_at), MIN(report_id) FROM reports "
        f"WHERE {' AND '.join(clauses)} GROUP BY signature ORDER BY n DESC, signature LIMIT ?"
    )
    return sql, [*params, limit]


def crash_counts_query(
    sku: str, from_ms: int, to_ms: int, bucket_ms: int, equals: Mapping[str, str] | None
) -> tuple[str, list[Any]]:
    clauses = ["sku = ?", "received_at >= ?", "received_at < ?"]
    params: list[Any] = [bucket_ms, sku, from_ms, to_ms]
    _equal_to(equals or {}, clauses, params)
    sql = (f"SELECT received_at - received_at % ? AS bucket, COUNT(*) FROM reports "
           f"WHERE {' AND '.join(clauses)} GROUP BY bucket")
    return sql, params


def bucket_counts(rows: Iterable[tuple[Any, Any]]) -> dict[int, int]:
    return {int(bucket): int(count) for bucket, count in rows}


def skus_seen(rows: Iterable[tuple[Any, Any]]) -> list[SkuSeen]:
    return [SkuSeen(str(sku), int(last)) for sku, last in rows]


def crash_groups(rows: Iterable[tuple[Any, ...]]) -> list[CrashGroup]:
    return [CrashGroup(str(sig), int(n), int(first), int(last), int(sample)) for sig, n, first, last, sample in rows]
