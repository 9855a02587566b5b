"""The crash index and the session counters on SQLite (MySQL's role in production)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from adapters.embedded.sqlite import SqliteFile, sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.queries import (
    APPLIED_OFFSET,
    BODY_HASH,
    INSERT_COLUMNS,
    PURGE_COUNTERS,
    PURGE_REPORTS,
    SELECT_REPORTS,
    SESSION_COUNTS,
    applied,
    applied_events,
    applied_range,
    body_hashes,
    bucket_counts,
    check_offset,
    covered,
    covered_query,
    crash_counts_query,
    crash_groups,
    crash_groups_query,
    entry_values,
    find_query,
    report_from_row,
    seen_events,
    skus_seen,
)
from ports import (
    Applied,
    Checkpoint,
    CrashGroup,
    IndexedReport,
    IndexEntry,
    ReportFilter,
    SessionBucket,
    SkuSeen,
)
from ports.timeutil import now_ms

# columns added before migrations were versioned: a data directory of those releases gets them when
# first opened by this one (what comes later is a migration of migrations/index/)
_LEGACY_COLUMNS = (
    ("reports", "body_hash", "TEXT"),
    ("applied_events", "body_hash", "TEXT"),
    ("applied_offsets", "fingerprint", "TEXT"),
)


def _skus_seen(table: str, time_column: str) -> str:
    """The skus of a table by name after one, with the latest `time_column` of each. SQLite has no
    loose index scan (GROUP BY sku read every row of each sku), so this steps from sku to sku with
    one (sku, time) index seek each, and one more for the sku's latest time."""
    return (
        "WITH RECURSIVE found (sku, n) AS ("
        f"SELECT MIN(sku), 1 FROM {table} WHERE sku > ? "
        f"UNION ALL SELECT (SELECT MIN(t.sku) FROM {table} t WHERE t.sku > found.sku), n + 1 FROM found "
        "WHERE found.sku IS NOT NULL AND n < ?) "
        f"SELECT sku, (SELECT MAX(t.{time_column}) FROM {table} t WHERE t.sku = found.sku) FROM found "
        "WHERE sku IS NOT NULL"
    )


class SqliteIndexDatabase:
    """One file holds the crash index, the counters and the leaderboards, as one MySQL schema does."""

    def __init__(self, path: Path) -> None:
        self.db = SqliteFile(path, "index", _LEGACY_COLUMNS)

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return applied(self.db.connection().execute(APPLIED_OFFSET, (consumer, topic_partition)).fetchone())

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        query, params = seen_events(consumer, event_ids)
        return dict(self.db.connection().execute(query, params).fetchall())

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return covered(self.db.connection().execute(*covered_query(consumer, topic_partition, offsets)), offsets)

    @contextmanager
    def checkpoint_transaction(self, checkpoint: Checkpoint) -> Iterator[sqlite3.Connection]:
        """A write transaction that also records the checkpoint, if nobody moved the offset first."""
        c = checkpoint
        with self.db.write() as conn:
            check_offset(conn.execute(APPLIED_OFFSET, (c.consumer, c.topic_partition)).fetchone(), c)
            yield conn
            conn.execute(
                "INSERT INTO applied_offsets (consumer, topic_partition, applied, fingerprint) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (consumer, topic_partition) "
                "DO UPDATE SET applied = excluded.applied, fingerprint = excluded.fingerprint",
                (c.consumer, c.topic_partition, c.new_offset, c.fingerprint),
            )
            conn.executemany(
                "INSERT INTO applied_events (consumer, event_id, applied_at, body_hash) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (consumer, event_id) DO NOTHING",
                applied_events(c, now_ms()),
            )
            extend, add = applied_range(c, now_ms())
            if conn.execute(*extend).rowcount == 0:
                conn.execute(*add)


@port_errors("index", sqlite_meaning)
class SqliteCrashIndex:
    SKU_ORDER_INDEX = "INDEXED BY reports_sku_id"
    SKUS = _skus_seen("reports", "received_at")

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._db = database.db

    def insert_many(self, entries: Sequence[IndexEntry], body_hashes: Mapping[str, str | None] | None = None) -> None:
        hashes = body_hashes or {}
        submit_time = now_ms()
        marks = ", ".join("?" * (len(INSERT_COLUMNS) + 1))
        with self._db.write() as conn:
            conn.executemany(
                f"INSERT INTO reports ({', '.join(INSERT_COLUMNS)}, {BODY_HASH}) VALUES ({marks}) "
                "ON CONFLICT (report_key) DO NOTHING",
                [(*entry_values(e, None, submit_time), hashes.get(e.report_key)) for e in entries],
            )

    def body_hashes(self, report_keys: Sequence[str]) -> dict[str, str | None]:
        query, params = body_hashes("reports", report_keys)
        return dict(self._db.connection().execute(query, params).fetchall())

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        sql, params = find_query(query, self.SKU_ORDER_INDEX)
        return [report_from_row(row) for row in self._db.connection().execute(sql, params)]

    def get(self, report_id: int) -> IndexedReport | None:
        row = self._db.connection().execute(f"{SELECT_REPORTS} WHERE report_id = ?", (report_id,)).fetchone()
        return None if row is None else report_from_row(row)

    def crash_groups(
        self, sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None = None
    ) -> list[CrashGroup]:
        return crash_groups(self._db.connection().execute(*crash_groups_query(sku, from_ms, to_ms, limit, equals)))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._db.connection().execute(self.SKUS, (after, limit)))

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                     equals: Mapping[str, str] | None = None) -> dict[int, int]:
        return bucket_counts(self._db.connection().execute(*crash_counts_query(sku, from_ms, to_ms, bucket_ms, equals)))

    def purge(self, before_ms: int) -> int:
        # AUTOINCREMENT: a purged reportId is never handed out again
        with self._db.write() as conn:
            return conn.execute(PURGE_REPORTS, (before_ms,)).rowcount

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()


@port_errors("counters", sqlite_meaning)
class SqliteSessionCounters:
    SKUS = _skus_seen("session_counts", "minute")

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._database.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._database.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._database.covered(consumer, topic_partition, offsets)

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as conn:
            conn.executemany(
                "INSERT INTO session_counts VALUES (?, ?, ?, ?) ON CONFLICT (sku, minute, kind) "
                "DO UPDATE SET count = count + excluded.count",
                [(b.sku, b.minute, b.kind, n) for b, n in increments.items()],
            )

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        return bucket_counts(self._db.connection().execute(SESSION_COUNTS, (bucket_ms, sku, from_ms, to_ms)))

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return skus_seen(self._db.connection().execute(self.SKUS, (after, limit)))

    def purge(self, before_ms: int) -> int:
        with self._db.write() as conn:
            return sum(conn.execute(statement, (before_ms,)).rowcount for statement in PURGE_COUNTERS)

    def close(self) -> None:
        self._db.close()
