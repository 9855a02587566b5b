"""The crash index and session counters on MySQL (RDS through RDS Proxy in AWS, MariaDB here)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from adapters.errors import port_errors
from adapters.mysql.database import DAYS_AHEAD, MysqlDatabase, mysql_meaning
from adapters.sql.projects import SqlProjectStore
from adapters.sql.queries import (
    INCREMENT_SESSIONS,
    PURGE_AWAITING,
    PURGE_COUNTERS,
    PURGE_REPORTS,
    entry_values,
    first_of_each_key,
    purge,
)
from adapters.sql.reads import CrashIndexReads, SessionCounterReads
from adapters.sql.releases import ReleaseReads, apply_releases, purge_statements
from adapters.sql.schema import INSERT_COLUMNS, report_keys, reports
from adapters.sql.statements import Statement, insert, listed, marks, padded, text
from ports import Checkpoint, IndexEntry, SessionBucket
from ports.releases import NO_RELEASES, ReleaseIncrements
from ports.timeutil import now_ms

_INSERT_KEYS = insert(report_keys, ("report_key", "submit_time", "body_hash"))
_INSERT_REPORTS = insert(reports, INSERT_COLUMNS)
_PURGE_KEYS = purge(report_keys, "submit_time")


@functools.cache
def _keys(count: int, lock: bool) -> Statement:
    """The keys of `count` (padded) reports that are indexed, and their ids; `lock`: locked for update."""
    found = sa.select(report_keys.c.report_key, report_keys.c.report_id).where(
        report_keys.c.report_key.in_(marks("key", count)))
    return Statement(found.with_for_update() if lock else found)


def _skus_seen(table: str, time_column: str) -> Statement:
    """The skus of a table by name after one, with the latest `time_column` of each: MySQL reads
    this with a loose index scan of (sku, time), one index entry a sku ("Using index for group-by")."""
    return text(f"SELECT sku, MAX({time_column}) FROM {table} WHERE sku > :after GROUP BY sku ORDER BY sku "
                "LIMIT :limit")


@port_errors("index", mysql_meaning)
class MysqlCrashIndex(CrashIndexReads):
    SKUS = _skus_seen("reports", "received_at")
    # report_keys: unpartitioned, and its row is written with the report's in one transaction
    KEYS = report_keys
    _database: MysqlDatabase

    def __init__(self, database: MysqlDatabase) -> None:
        self._database = database

    def insert_many(self, entries: Sequence[IndexEntry],
                    body_hashes: Mapping[str, str | None] | None = None) -> list[IndexEntry]:
        hashes = body_hashes or {}
        unique = first_of_each_key(entries)
        if not unique:
            return []
        keys = [e.report_key for e in unique]
        with self._database.transaction() as t:
            # the keys already indexed are locked and skipped: their rows went in with them
            known = {key for key, _ in t.rows(_keys(padded(len(keys)), True), listed("key", keys))}
            fresh = [e for e in unique if e.report_key not in known]
            if not fresh:
                return []
            submit_time = now_ms()
            t.execute_rows(_INSERT_KEYS, [(e.report_key, submit_time, hashes.get(e.report_key)) for e in fresh])
            fresh_keys = [e.report_key for e in fresh]
            ids: dict[str, int] = dict(t.rows(_keys(padded(len(fresh_keys)), False), listed("key", fresh_keys)))
            # executemany folds these into one multi-row INSERT
            t.execute_rows(_INSERT_REPORTS, [entry_values(e, ids[e.report_key], submit_time) for e in fresh])
        return fresh

    def purge(self, before_ms: int) -> int:
        """Whole days go by dropping their partitions; the rest of the cut day row by row. Then the
        reportKeys of purged reports: a key row holds its report's submit_time, so the same cut
        takes exactly those, whatever is indexed meanwhile."""
        purged = self._database.drop_day_partitions(before_ms)
        purged += self._database.delete_in_chunks(PURGE_REPORTS, {"before": before_ms})
        self._database.delete_in_chunks(_PURGE_KEYS, {"before": before_ms})
        self._database.delete_in_chunks(PURGE_AWAITING, {"before": before_ms})
        self._database.ensure_day_partitions(DAYS_AHEAD)
        return purged

    def ping(self) -> None:
        self._database.ping()

    def close(self) -> None:
        self._database.close()


@port_errors("counters", mysql_meaning)
class MysqlSessionCounters(SessionCounterReads, ReleaseReads):
    SKUS = _skus_seen("session_counts", "minute")
    _database: MysqlDatabase

    def __init__(self, database: MysqlDatabase) -> None:
        self._database = database

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int],
              releases: ReleaseIncrements = NO_RELEASES) -> None:
        with self._database.checkpoint_transaction(checkpoint) as t:
            t.execute_rows(INCREMENT_SESSIONS, [(b.sku, b.minute, b.kind, n) for b, n in increments.items()])
            apply_releases(t, releases)

    def purge(self, before_ms: int) -> int:
        return (sum(self._database.delete_in_chunks(statement, {"before": before_ms}) for statement in PURGE_COUNTERS)
                + sum(self._database.delete_in_chunks(statement, {"before": before})
                      for statement, before in purge_statements(before_ms)))

    def close(self) -> None:
        self._database.close()


@port_errors("projects", mysql_meaning)
class MysqlProjectStore(SqlProjectStore):
    """In the crash index's schema."""
