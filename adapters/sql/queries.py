"""The SQL the index and counters share on SQLite and MySQL (adapters.sql.statements), and the
conversions of their rows."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from adapters.sql.schema import (
    ENTRY_COLUMNS,
    INSERT_COLUMNS,
    applied_events,
    applied_offsets,
    applied_ranges,
    awaiting_symbols,
    reports,
    session_counts,
)
from adapters.sql.statements import Query, Statement, insert, listed, marks, padded
from ports import (
    UNNAMED_CRASH_TYPE,
    Applied,
    Checkpoint,
    CrashGroup,
    IndexedReport,
    IndexEntry,
    OffsetConflict,
    Processed,
    ReportFilter,
    SkuSeen,
)

_bind = sa.bindparam
_SELECT_REPORTS = sa.select(*(reports.c[c] for c in INSERT_COLUMNS))
GET_REPORT = Statement(_SELECT_REPORTS.where(reports.c.report_id == _bind("report_id")))

_bucket = (session_counts.c.minute - session_counts.c.minute % _bind("bucket_ms")).label("bucket")
SESSION_COUNTS = Statement(
    sa.select(_bucket, sa.func.sum(session_counts.c.count))
    .where(session_counts.c.sku == _bind("sku"), session_counts.c.minute >= _bind("from_ms"),
           session_counts.c.minute < _bind("to_ms"))
    .group_by(_bucket)
)
INCREMENT_SESSIONS = insert(session_counts, ("sku", "minute", "kind", "count"), keys=("sku", "minute", "kind"),
                            add=("count",))

_applied = sa.select(applied_offsets.c.applied, applied_offsets.c.fingerprint).where(
    applied_offsets.c.consumer == _bind("consumer"), applied_offsets.c.topic_partition == _bind("topic_partition"))
APPLIED_OFFSET = Statement(_applied)
# the compare of compare-and-set: MySQL locks the row (SQLite's write transaction holds the file)
APPLIED_OFFSET_FOR_UPDATE = Statement(_applied.with_for_update())
STORE_OFFSET = insert(applied_offsets, ("consumer", "topic_partition", "applied", "fingerprint"),
                      keys=("consumer", "topic_partition"), replace=("applied", "fingerprint"))
STORE_EVENTS = insert(applied_events, ("consumer", "event_id", "applied_at", "body_hash"),
                      keys=("consumer", "event_id"))
EXTEND_RANGE = Statement(
    sa.update(applied_ranges)
    .where(applied_ranges.c.consumer == _bind("consumer"), applied_ranges.c.topic_partition == _bind("topic_partition"),
           applied_ranges.c.last_offset == _bind("before"))
    .values(last_offset=_bind("last_offset"), applied_at=_bind("applied_at"))
)
# a row that starts at the same offset, left by a log that was reset without deleting its ranges,
# gives way (ForeignOffset says to delete them with the offset)
ADD_RANGE = insert(applied_ranges, ("consumer", "topic_partition", "first_offset", "last_offset", "applied_at"),
                   keys=("consumer", "topic_partition", "first_offset"), replace=("last_offset", "applied_at"))

# MySQL deletes this many rows a statement, a transaction each, so that a purge holds few locks
PURGE_CHUNK = 5_000


def purge(table: sa.Table, column: str) -> Statement:
    """Deletes rows of `table` whose `column` is below `before`: all of them on SQLite, PURGE_CHUNK
    on MySQL (run it until it deletes fewer)."""
    return Statement(sa.delete(table).where(table.c[column] < _bind("before"))
                     .with_dialect_options(mysql_limit=PURGE_CHUNK))


# retention (rule 6 of docs/architecture.md): what the purge job deletes, oldest first
PURGE_REPORTS = purge(reports, "submit_time")
PURGE_AWAITING = purge(awaiting_symbols, "added_at")
PURGE_COUNTERS = (
    purge(session_counts, "minute"),
    purge(applied_events, "applied_at"),
    purge(applied_ranges, "applied_at"),
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


def offset_values(checkpoint: Checkpoint) -> dict[str, Any]:
    return {"consumer": checkpoint.consumer, "topic_partition": checkpoint.topic_partition}


def stored_offset(checkpoint: Checkpoint) -> tuple[Any, ...]:
    """The row of STORE_OFFSET for a checkpoint."""
    c = checkpoint
    return c.consumer, c.topic_partition, c.new_offset, c.fingerprint


@functools.cache
def _seen_events(count: int) -> Statement:
    return Statement(sa.select(applied_events.c.event_id, applied_events.c.body_hash).where(
        applied_events.c.consumer == _bind("consumer"), applied_events.c.event_id.in_(marks("event", count))))


def seen_events(consumer: str, event_ids: Sequence[str]) -> Query:
    # no ids: the query matches nothing (an id no event has; padded() asks for one)
    ids = list(event_ids) or [""]
    return _seen_events(padded(len(ids))), {"consumer": consumer, **listed("event", ids)}


def applied_events_rows(checkpoint: Checkpoint, applied_at: int) -> list[tuple[str, str, int, str | None]]:
    """Rows of STORE_EVENTS (consumer, event_id, applied_at, body_hash) for a checkpoint."""
    return [(checkpoint.consumer, event_id, applied_at, body_hash) for event_id, body_hash in checkpoint.events.items()]


_COVERED = Statement(sa.select(applied_ranges.c.first_offset, applied_ranges.c.last_offset).where(
    applied_ranges.c.consumer == _bind("consumer"), applied_ranges.c.topic_partition == _bind("topic_partition"),
    applied_ranges.c.first_offset <= _bind("greatest"), applied_ranges.c.last_offset >= _bind("least")))


def covered_query(consumer: str, topic_partition: str, offsets: Sequence[int]) -> Query:
    """The stored ranges that overlap from the least to the greatest of `offsets` (none for none)."""
    return _COVERED, {"consumer": consumer, "topic_partition": topic_partition,
                      "greatest": max(offsets, default=-1), "least": min(offsets, default=0)}


def covered(rows: Iterable[tuple[Any, Any]], offsets: Sequence[int]) -> set[int]:
    """Those of `offsets` inside one of the ranges of covered_query."""
    ranges = [(int(first), int(last)) for first, last in rows]
    return {offset for offset in offsets if any(first <= offset <= last for first, last in ranges)}


def applied_range(checkpoint: Checkpoint, applied_at: int) -> tuple[Query, Query]:
    """The statements that store the offsets a checkpoint covers: the first extends the range that
    ends right before them (so a partition read without a gap stays one row, and a replay's lookup
    reads few), and when it changed no row, the second adds one."""
    c = checkpoint
    first = c.new_offset if c.first_offset is None else c.first_offset
    partition = offset_values(c)
    return (
        (EXTEND_RANGE, {**partition, "before": first - 1, "last_offset": c.new_offset, "applied_at": applied_at}),
        (ADD_RANGE, {**partition, "first_offset": first, "last_offset": c.new_offset, "applied_at": applied_at}),
    )


@functools.cache
def _body_hashes(table: sa.Table, count: int) -> Statement:
    return Statement(sa.select(table.c.report_key, table.c.body_hash).where(
        table.c.report_key.in_(marks("key", count))))


def body_hashes(table: sa.Table, report_keys: Sequence[str]) -> Query:
    keys = list(report_keys) or [""]  # no report has the empty key
    return _body_hashes(table, padded(len(keys))), listed("key", keys)


@functools.cache
def _origins(table: sa.Table, count: int) -> Statement:
    found = sa.select(table.c.report_key, reports.c.sku, reports.c.build_version, reports.c.received_at,
                      reports.c.signature)
    if table is not reports:  # MySQL's report_keys: each key's report by its id, a seek a partition
        found = found.join_from(table, reports, reports.c.report_id == table.c.report_id)
    return Statement(found.where(table.c.report_key.in_(marks("key", count))))


def origins(table: sa.Table, report_keys: Sequence[str]) -> Query:
    """Those of these report keys that are indexed, with their skus, builds, receipts and signatures
    (rows of key, sku, build_version, received_at, signature); `table` holds the keys (reports on
    SQLite, report_keys on MySQL)."""
    keys = list(report_keys) or [""]
    return _origins(table, padded(len(keys))), listed("key", keys)


@functools.cache
def _report_ids(table: sa.Table, count: int) -> Statement:
    return Statement(sa.select(table.c.report_key, table.c.report_id).where(
        table.c.report_key.in_(marks("key", count))))


def report_ids(table: sa.Table, report_keys: Sequence[str]) -> Query:
    """Those of these report keys that are indexed, with their report ids (rows of key, id)."""
    keys = list(report_keys) or [""]
    return _report_ids(table, padded(len(keys))), listed("key", keys)


_c = reports.c
# a walk's signature replaces the report's (when it found one), and its crash reason names a
# crash the report did not (a native upload's placeholder included)
SET_PROCESSED = Statement(sa.update(reports).where(_c.report_id == _bind("report_id")).values(
    processing=_bind("processing"),
    signature=sa.func.coalesce(_bind("signature"), _c.signature),
    crash_type=sa.case((sa.or_(_c.crash_type.is_(None), _c.crash_type == UNNAMED_CRASH_TYPE),
                        sa.func.coalesce(_bind("crash_type"), _c.crash_type)), else_=_c.crash_type),
))
SET_SIGNATURE = Statement(sa.update(reports).where(_c.report_id == _bind("report_id")).values(
    signature=_bind("signature")), in_order=("signature", "report_id"))
AWAIT_SYMBOLS = insert(awaiting_symbols, ("symbol_path", "report_key", "added_at"), keys=("symbol_path", "report_key"),
                       replace=("added_at",))
AWAITING = Statement(sa.select(awaiting_symbols.c.report_key).where(
    awaiting_symbols.c.symbol_path == _bind("path"), awaiting_symbols.c.report_key > _bind("after"))
    .order_by(awaiting_symbols.c.report_key).limit(_bind("limit")))


@functools.cache
def _forget_awaiting(count: int) -> Statement:
    return Statement(sa.delete(awaiting_symbols).where(awaiting_symbols.c.report_key.in_(marks("key", count))))


def processed_values(result: Processed, report_id: int) -> dict[str, Any]:
    return {"report_id": report_id, "processing": result.state, "signature": result.signature,
            "crash_type": result.crash_type}


def forget_awaiting(report_keys: Sequence[str]) -> Query:
    """Deletes what these reports awaited (their walk says it again)."""
    keys = list(report_keys) or [""]
    return _forget_awaiting(padded(len(keys))), listed("key", keys)


def first_of_each_key(entries: Sequence[IndexEntry]) -> list[IndexEntry]:
    """The entries in order, of a report key there more than once the first."""
    first: dict[str, IndexEntry] = {}
    for entry in entries:
        first.setdefault(entry.report_key, entry)
    return list(first.values())


def entry_values(entry: IndexEntry, report_id: int | None, submit_time: int) -> tuple[Any, ...]:
    """Values in INSERT_COLUMNS order; report_id None lets the database assign it."""
    # as UTF-8: escaped, 64 names of 128 letters outside the BMP outgrow MySQL's TEXT (64 KB)
    names = json.dumps(list(entry.attachments), ensure_ascii=False)
    return (report_id, submit_time, *(getattr(entry, c) for c in ENTRY_COLUMNS), names)


def report_from_row(row: Iterable[Any]) -> IndexedReport:
    report_id, submit_time, *fields, attachments = row
    entry = IndexEntry(**dict(zip(ENTRY_COLUMNS, fields, strict=True)), attachments=tuple(json.loads(attachments)))
    return IndexedReport(int(report_id), int(submit_time), entry)


def _equal_to(names: Iterable[str]) -> list[sa.ColumnElement[bool]]:
    """The exact-match filters on the named IndexEntry fields (values by the same names)."""
    clauses: list[sa.ColumnElement[bool]] = []
    for name in names:
        if name not in ENTRY_COLUMNS:  # a name goes into the statement: only a column's
            raise ValueError(f"not a column of the index: {name}")
        clauses.append(reports.c[name] == _bind(f"equals_{name}", type_=sa.String))
    return clauses


def _equal_values(equals: Mapping[str, str] | None) -> tuple[tuple[str, ...], dict[str, str]]:
    names = tuple(sorted(equals or {}))
    return names, {f"equals_{name}": (equals or {})[name] for name in names}


def through(select: sa.Select[Any], index: str) -> sa.Select[Any]:
    """The select, told to read the reports through `index` on both engines (FORCE INDEX, INDEXED BY)."""
    return select.with_hint(reports, f"FORCE INDEX ({index})", "mysql").with_hint(reports, f"INDEXED BY {index}",
                                                                                 "sqlite")


# a page filtered by one of these reads the index of its value's reports in id order (the first
# named, where a page names several); by none, the sku's (sku, report_id): else a page of a rare
# build walks every report of its sku
_PAGE_INDEXES = (("signature", "reports_sku_signature_id"), ("build_version", "reports_sku_build_id"))


@functools.cache
def _find(newest_first: bool, after: bool, since: bool, until: bool, equals: tuple[str, ...]) -> Statement:
    """Left to choose, MySQL walked the primary key through other skus' reports for a small LIMIT,
    or read every report of the sku to sort them; SQLite sorted them all: each is told to read an
    index in report_id order, forwards or backwards."""
    c = reports.c
    index = next((index for field, index in _PAGE_INDEXES if field in equals), "reports_sku_id")
    clauses = [c.sku == _bind("sku"), *_equal_to(equals)]
    if after:
        clauses.append(c.report_id < _bind("after") if newest_first else c.report_id > _bind("after"))
    if since:
        clauses.append(c.submit_time >= _bind("from_ms"))
    if until:
        clauses.append(c.submit_time < _bind("to_ms"))
    return Statement(
        through(_SELECT_REPORTS.where(*clauses), index)
        .order_by(c.report_id.desc() if newest_first else c.report_id.asc())
        .limit(_bind("limit")).offset(_bind("offset"))
    )


def find_query(query: ReportFilter) -> Query:
    names, values = _equal_values(query.equals)
    statement = _find(query.newest_first, query.after_id is not None, query.from_ms is not None,
                      query.to_ms is not None, names)
    return statement, {"sku": query.sku, "after": query.after_id, "from_ms": query.from_ms, "to_ms": query.to_ms,
                       "limit": query.limit, "offset": query.offset, **values}


def _received_between() -> list[sa.ColumnElement[bool]]:
    c = reports.c
    return [c.sku == _bind("sku"), c.received_at >= _bind("from_ms"), c.received_at < _bind("to_ms")]


def _window_index(equals: tuple[str, ...]) -> str:
    """The index that holds a window's entries with their signatures: a build's, a signature's, or
    the sku's with their platforms and crash types. Left to choose, MariaDB took one that looked up
    each report's receipt or signature, five times as long at a million reports."""
    if "build_version" in equals:
        return "reports_sku_build_received"
    return "reports_sku_signature" if "signature" in equals else "reports_sku_received_groups"


@functools.cache
def _crash_groups(equals: tuple[str, ...]) -> Statement:
    c = reports.c
    n = sa.func.count().label("n")
    index = _window_index(equals)
    return Statement(
        through(sa.select(c.signature, n, sa.func.min(c.received_at), sa.func.max(c.received_at),
                          sa.func.min(c.report_id)), index)
        .where(*_received_between(), c.signature.is_not(None), *_equal_to(equals))
        .group_by(c.signature).order_by(n.desc(), c.signature).limit(_bind("limit"))
    )


def crash_groups_query(sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None) -> Query:
    names, values = _equal_values(equals)
    return _crash_groups(names), {"sku": sku, "from_ms": from_ms, "to_ms": to_ms, "limit": limit, **values}


@functools.cache
def _crash_counts(equals: tuple[str, ...]) -> Statement:
    c = reports.c
    bucket = (c.received_at - c.received_at % _bind("bucket_ms")).label("bucket")
    # unfiltered, the window's receipts alone: the narrowest index that holds them
    index = _window_index(equals) if equals else "reports_sku_received"
    return Statement(through(sa.select(bucket, sa.func.count()), index)
                     .where(*_received_between(), *_equal_to(equals)).group_by(bucket))


def crash_counts_query(sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                       equals: Mapping[str, str] | None) -> Query:
    names, values = _equal_values(equals)
    return _crash_counts(names), {"sku": sku, "from_ms": from_ms, "to_ms": to_ms, "bucket_ms": bucket_ms, **values}


def bucket_counts(rows: Iterable[tuple[Any, Any]]) -> dict[int, int]:
    return {int(bucket): int(count) for bucket, count in rows}


def skus_seen(rows: Iterable[tuple[Any, Any]]) -> list[SkuSeen]:
    return [SkuSeen(str(sku), int(last)) for sku, last in rows]


def crash_groups(rows: Iterable[tuple[Any, ...]]) -> list[CrashGroup]:
    return [CrashGroup(str(sig), int(n), int(first), int(last), int(sample)) for sig, n, first, last, sample in rows]
