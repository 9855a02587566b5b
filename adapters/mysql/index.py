"""The crash index and session counters on MySQL (RDS through RDS Proxy in AWS, MariaDB here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.errors import port_errors
from adapters.mysql.database import DAYS_AHEAD, MysqlDatabase, mysql_meaning
from adapters.sql.queries import INSERT_COLUMNS, PURGE_COUNTERS, PURGE_REPORTS, entry_values, pyformat
from adapters.sql.reads import CrashIndexReads, SessionCounterReads
from ports import Checkpoint, IndexEntry, SessionBucket
from ports.timeutil import now_ms


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _skus_seen(table: str, time_column: str) -> str:
    """The skus of a table by name after one, with the latest `time_column` of each: MySQL reads
    this with a loose index scan of (sku, time), one index entry a sku ("Using index for group-by")."""
    return f"SELECT sku, MAX({time_column}) FROM {table} WHERE sku > ? GROUP BY sku ORDER BY sku LIMIT ?"


@port_errors("index", mysql_meaning)
class MysqlCrashIndex(CrashIndexReads):
    SKU_ORDER_INDEX = "FORCE INDEX (reports_sku_id)"
    SKUS = _skus_seen("reports", "received_at")
    # report_keys: unpartitioned, and its row is written with the report's in one transaction
    BODY_HASHES = "report_keys"
    _database: MysqlDatabase

    def __init__(self, database: MysqlDatabase) -> None:
        self._database = database

    def insert_many(self, entries: Sequence[IndexEntry], body_hashes: Mapping[str, str | None] | None = None) -> None:
        hashes = body_hashes or {}
        unique = list({e.report_key: e for e in reversed(entries)}.values())[::-1]
        if not unique:
            return
        keys = [e.report_key for e in unique]
        with self._database.transaction() as cursor:
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

    def purge(self, before_ms: int) -> int:
        """Whole days go by dropping their partitions; the rest of the cut day row by row. Then the
        reportKeys of purged reports (ids are handed out in submit order, so: below the oldest left)."""
        purged = self._database.drop_day_partitions(before_ms)
        purged += self._database.delete_in_chunks(pyformat(PURGE_REPORTS), (before_ms,))
        with self._database.connection().cursor() as cursor:
            cursor.execute("SELECT MIN(report_id) FROM reports")
            (oldest,) = cursor.fetchone() or (None,)
            if oldest is None:
                cursor.execute("SELECT COALESCE(MAX(report_id), 0) + 1 FROM report_keys")
                (oldest,) = cursor.fetchone() or (0,)
        self._database.delete_in_chunks("DELETE FROM report_keys WHERE report_id < %s", (oldest,))
        self._database.ensure_day_partitions(DAYS_AHEAD)
        return purged

    def ping(self) -> None:
        self._database.ping()

    def close(self) -> None:
        self._database.close()


@port_errors("counters", mysql_meaning)
class MysqlSessionCounters(SessionCounterReads):
    SKUS = _skus_seen("session_counts", "minute")
    _database: MysqlDatabase

    def __init__(self, database: MysqlDatabase) -> None:
        self._database = database

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as cursor:
            cursor.executemany(
                "INSERT INTO session_counts (sku, minute, kind, count) VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE count = count + VALUES(count)",
                [(b.sku, b.minute, b.kind, n) for b, n in increments.items()],
            )

    def purge(self, before_ms: int) -> int:
        return sum(self._database.delete_in_chunks(pyformat(statement), (before_ms,)) for statement in PURGE_COUNTERS)

    def close(self) -> None:
        self._database.close()
