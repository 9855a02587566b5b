"""The crash index and the session counters on SQLite (MySQL's role in production)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapters.embedded.sqlite import SqliteFile
from adapters.ports import (
    FILTERABLE,
    IndexedReport,
    IndexEntry,
    OffsetConflict,
    ReportFilter,
    SessionBucket,
)
from core.timeutil import now_ms

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    report_id INTEGER PRIMARY KEY AUTOINCREMENT,
    report_key TEXT NOT NULL UNIQUE,
    event_id TEXT NOT NULL,
    sku TEXT NOT NULL,
    submit_time INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    crash_type TEXT,
    error_code TEXT,
    platform TEXT,
    build_version TEXT,
    signature TEXT,
    size_bytes INTEGER NOT NULL,
    attachments TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_sku_submit ON reports (sku, submit_time);
CREATE INDEX IF NOT EXISTS reports_sku_received ON reports (sku, received_at);
CREATE TABLE IF NOT EXISTS session_counts (
    sku TEXT NOT NULL,
    minute INTEGER NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (sku, minute, kind)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_offsets (
    consumer TEXT NOT NULL,
    topic_partition TEXT NOT NULL,
    applied INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic_partition)
) WITHOUT ROWID;
"""

_ENTRY_COLUMNS = (
    "report_key", "event_id", "sku", "received_at", "size_bytes",
    "crash_type", "error_code", "platform", "build_version", "signature",
)
_COLUMNS = f"report_id, submit_time, {', '.join(_ENTRY_COLUMNS)}, attachments"


def _report(row: tuple[Any, ...]) -> IndexedReport:
    report_id, submit_time, *fields, attachments = row
    entry = IndexEntry(**dict(zip(_ENTRY_COLUMNS, fields, strict=True)), attachments=tuple(json.loads(attachments)))
    return IndexedReport(report_id, submit_time, entry)


def _bucket_counts(rows: Any) -> dict[int, int]:
    return {int(bucket): int(count) for bucket, count in rows}


class SqliteIndexDatabase:
    """One file holds both the crash index and the counters, as one MySQL schema does."""

    def __init__(self, path: Path) -> None:
        self.db = SqliteFile(path, _SCHEMA)


class SqliteCrashIndex:
    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._db = database.db

    def insert_many(self, entries: Sequence[IndexEntry]) -> None:
        submit_time = now_ms()
        rows = [
            (e.report_key, e.event_id, e.sku, submit_time, e.received_at, e.crash_type, e.error_code,
             e.platform, e.build_version, e.signature, e.size_bytes, json.dumps(list(e.attachments)))
            for e in entries
        ]
        with self._db.write() as conn:
            conn.executemany(
                "INSERT INTO reports (report_key, event_id, sku, submit_time, received_at, crash_type, "
                "error_code, platform, build_version, signature, size_bytes, attachments) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (report_key) DO NOTHING",
                rows,
            )

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        clauses = ["sku = ?", "report_id > ?"]
        params: list[Any] = [query.sku, query.after_id]
        if query.from_ms is not None:
            clauses.append("submit_time >= ?")
            params.append(query.from_ms)
        if query.to_ms is not None:
            clauses.append("submit_time < ?")
            params.append(query.to_ms)
        for name, value in sorted(query.equals.items()):
            if name not in FILTERABLE:
                raise ValueError(f"not a filterable field: {name}")
            clauses.append(f"{name} = ?")
            params.append(value)
        params += [query.limit, query.offset]
        rows = self._db.connection().execute(
            f"SELECT {_COLUMNS} FROM reports WHERE {' AND '.join(clauses)} "
            "ORDER BY report_id LIMIT ? OFFSET ?",
            params,
        )
        return [_report(row) for row in rows]

    def get(self, report_id: int) -> IndexedReport | None:
        row = self._db.connection().execute(
            f"SELECT {_COLUMNS} FROM reports WHERE report_id = ?", (report_id,)
        ).fetchone()
        return None if row is None else _report(row)

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        return _bucket_counts(
            self._db.connection().execute(
                "SELECT received_at - received_at % ? AS bucket, COUNT(*) FROM reports "
                "WHERE sku = ? AND received_at >= ? AND received_at < ? GROUP BY bucket",
                (bucket_ms, sku, from_ms, to_ms),
            )
        )

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()


class SqliteSessionCounters:
    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._db = database.db

    def applied_offset(self, consumer: str, topic_partition: str) -> int:
        row = self._db.connection().execute(
            "SELECT applied FROM applied_offsets WHERE consumer = ? AND topic_partition = ?",
            (consumer, topic_partition),
        ).fetchone()
        return -1 if row is None else int(row[0])

    def apply(
        self,
        consumer: str,
        topic_partition: str,
        expected_offset: int,
        new_offset: int,
        increments: Mapping[SessionBucket, int],
    ) -> None:
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT applied FROM applied_offsets WHERE consumer = ? AND topic_partition = ?",
                (consumer, topic_partition),
            ).fetchone()
            if (-1 if row is None else row[0]) != expected_offset:
                raise OffsetConflict(f"{consumer} {topic_partition}: offset moved past {expected_offset}")
            conn.executemany(
                "INSERT INTO session_counts VALUES (?, ?, ?, ?) ON CONFLICT (sku, minute, kind) "
                "DO UPDATE SET count = count + excluded.count",
                [(b.sku, b.minute, b.kind, n) for b, n in increments.items()],
            )
            conn.execute(
                "INSERT INTO applied_offsets VALUES (?, ?, ?) ON CONFLICT (consumer, topic_partition) "
                "DO UPDATE SET applied = excluded.applied",
                (consumer, topic_partition, new_offset),
            )

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        return _bucket_counts(
            self._db.connection().execute(
                "SELECT minute - minute % ? AS bucket, SUM(count) FROM session_counts "
                "WHERE sku = ? AND minute >= ? AND minute < ? GROUP BY bucket",
                (bucket_ms, sku, from_ms, to_ms),
            )
        )

    def close(self) -> None:
        self._db.close()
