"""The crash index and session counters on MySQL (RDS through RDS Proxy in AWS, MariaDB here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.errors import port_errors
from adapters.mysql.database import DAYS_AHEAD, MysqlDatabase, mysql_meaning
from adapters.sql.queries import (
    INSERT_COLUMNS,
    PURGE_COUNTERS,
    PURGE_REPORTS,
    SELECT_REPORTS,
    SESSION_COUNTS,
    body_hashes,
    bucket_counts,
    crash_counts_query,
    crash_groups,
    crash_groups_query,
    entry_values,
    find_query,
    pyformat,
    report_from_row,
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


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _skus_seen(table: str, time_column: str) -> str:
    """The skus of a table by name after one, with the latest `time_column` of each: MySQL reads
    this with a loose index scan of (sku, time), one index entry a sku ("Using index for group-by")."""
    return (f"SELECT sku, MAX({time_column}) FROM {table} WHERE sku > %s "
            "GROUP BY sku ORDER BY sku LIMIT %s")


def _skus(database: MysqlDatabase, query: str, after: str, limit: int) -> list[SkuSeen]:
    with database.connection().cursor() as cursor:
        cursor.execute(query, (after, limit))
        return skus_seen(cursor.fetchall())


@port_errors("index", mysql_meaning)
class MysqlCrashIndex:
    SKU_ORDER_INDEX = "FORCE INDEX (reports_sku_id)"
    SKUS = _skus_seen("reports", "received_at")

    def __init__(self, database: MysqlDatabase) -> None:
        self._db = database

    def insert_many(self, entries: Sequence[IndexEntry], body_hashes: Mapping[str, str | None] | None = None) -> None:
        hashes = body_hashes or {}
        unique = list({e.report_key: e for e in reversed(entries)}.values())[::-1]
        if not unique:
            return
        keys = [e.report_key for e in unique]
        with self._db.transaction() as cursor:
            # the keys already indexed are locked and skipped: their rows went in with them
            cursor.execute(f"SELECT report_key FROM report_keys WHERE report_key IN ({_marks(len(keys))}) FOR UPDATE",
                           keys)
            known = {row[0] for row in cursor.fetchall()}
            fresh = [e for e in unique if e.report_key not in known]
            if not fresh:
                return
            cursor.executemany("INSERT INTO report_keys (report_key, body_hash) VALUES (%s, %s)",
                               [(e.report_key, hashes.get(e.report_key)) for e in fresh])
            cursor.execute(
                f"SELECT report_key, report_id FROM report_keys WHERE report_key IN ({_marks(len(fresh))})",
                [e.report_key for e in fresh],
            )
            ids = dict(cursor.fetchall())
            submit_time = now_ms()
            # executemany folds these into one multi-row INSERT
            cursor.executemany(
                f"INSERT INTO reports ({', '.join(INSERT_COLUMNS)}) VALUES ({_marks(len(INSERT_COLUMNS))})",
                [entry_values(e, ids[e.report_key], submit_time) for e in fresh],
            )

    def body_hashes(self, report_keys: Sequence[str]) -> dict[str, str | None]:
        # report_keys: unpartitioned, and its row is written with the report's in one transaction
        query, params = body_hashes("report_keys", report_keys)
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(query), params)
            return dict(cursor.fetchall())

    def find(self, query: ReportFilter) -> list[IndexedReport]:
        sql, params = find_query(query, self.SKU_ORDER_INDEX)
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(sql), params)
            return [report_from_row(row) for row in cursor.fetchall()]

    def get(self, report_id: int) -> IndexedReport | None:
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(f"{SELECT_REPORTS} WHERE report_id = ?"), (report_id,))
            row = cursor.fetchone()
        return None if row is None else report_from_row(row)

    def crash_groups(
        self, sku: str, from_ms: int, to_ms: int, limit: int, equals: Mapping[str, str] | None = None
    ) -> list[CrashGroup]:
        sql, params = crash_groups_query(sku, from_ms, to_ms, limit, equals)
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(sql), params)
            return crash_groups(cursor.fetchall())

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return _skus(self._db, self.SKUS, after, limit)

    def crash_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int,
                     equals: Mapping[str, str] | None = None) -> dict[int, int]:
        sql, params = crash_counts_query(sku, from_ms, to_ms, bucket_ms, equals)
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(sql), params)
            return bucket_counts(cursor.fetchall())

    def purge(self, before_ms: int) -> int:
        """Whole days go by dropping their partitions; the rest of the cut day row by row. Then the
        reportKeys of purged reports (ids are handed out in submit order, so: below the oldest left)."""
        purged = self._db.drop_day_partitions(before_ms)
        purged += self._db.delete_in_chunks(pyformat(PURGE_REPORTS), (before_ms,))
        with self._db.connection().cursor() as cursor:
            cursor.execute("SELECT MIN(report_id) FROM reports")
            (oldest,) = cursor.fetchone() or (None,)
            if oldest is None:
                cursor.execute("SELECT COALESCE(MAX(report_id), 0) + 1 FROM report_keys")
                (oldest,) = cursor.fetchone() or (0,)
        self._db.delete_in_chunks("DELETE FROM report_keys WHERE report_id < %s", (oldest,))
        self._db.ensure_day_partitions(DAYS_AHEAD)
        return purged

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()


@port_errors("counters", mysql_meaning)
class MysqlSessionCounters:
    SKUS = _skus_seen("session_counts", "minute")

    def __init__(self, database: MysqlDatabase) -> None:
        self._db = database

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._db.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._db.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._db.covered(consumer, topic_partition, offsets)

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int]) -> None:
        with self._db.checkpoint_transaction(checkpoint) as cursor:
            cursor.executemany(
                "INSERT INTO session_counts (sku, minute, kind, count) VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE count = count + VALUES(count)",
                [(b.sku, b.minute, b.kind, n) for b, n in increments.items()],
            )

    def session_counts(self, sku: str, from_ms: int, to_ms: int, bucket_ms: int) -> dict[int, int]:
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(SESSION_COUNTS), (bucket_ms, sku, from_ms, to_ms))
            return bucket_counts(cursor.fetchall())

    def skus(self, after: str, limit: int) -> list[SkuSeen]:
        return _skus(self._db, self.SKUS, after, limit)

    def purge(self, before_ms: int) -> int:
        return sum(self._db.delete_in_chunks(pyformat(statement), (before_ms,)) for statement in PURGE_COUNTERS)

    def close(self) -> None:
        self._db.close()
