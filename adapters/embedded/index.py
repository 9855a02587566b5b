"""The crash index and the session counters on SQLite (MySQL's role in production)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.embedded.sqlite import INDEX, SqliteFile, sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.queries import (
    APPLIED_OFFSET,
    BODY_HASH,
    INSERT_COLUMNS,
    PURGE_COUNTERS,
    PURGE_REPORTS,
    applied_events,
    applied_range,
    check_offset,
    entry_values,
)
from adapters.sql.reads import CrashIndexReads, Rows, SessionCounterReads, SqlDatabase
from ports import Checkpoint, IndexEntry, SessionBucket
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


class SqliteIndexDatabase(SqlDatabase):
    """One file holds the crash index, the counters and the leaderboards, as one MySQL schema does."""

    def __init__(self, path: Path) -> None:
        self.db = SqliteFile(path, INDEX, _LEGACY_COLUMNS)

    def rows(self, query: str, params: Sequence[Any] = ()) -> Rows:
        return self.db.connection().execute(query, params).fetchall()

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
class SqliteCrashIndex(CrashIndexReads):
    SKU_ORDER_INDEX = "INDEXED BY reports_sku_id"
    SKUS = _skus_seen("reports", "received_at")
    BODY_HASHES = "reports"

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
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

    def purge(self, before_ms: int) -> int:
        # AUTOINCREMENT: a purged reportId is never handed out again
        with self._db.write() as conn:
            return conn.execute(PURGE_REPORTS, (before_ms,)).rowcount

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()


@port_errors("counters", sqlite_meaning)
class SqliteSessionCounters(SessionCounterReads):
    SKUS = _skus_seen("session_counts", "minute")
    _database: SqliteIndexDatabase

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as conn:
            conn.executemany(
                "INSERT INTO session_counts VALUES (?, ?, ?, ?) ON CONFLICT (sku, minute, kind) "
                "DO UPDATE SET count = count + excluded.count",
                [(b.sku, b.minute, b.kind, n) for b, n in increments.items()],
            )

    def purge(self, before_ms: int) -> int:
        with self._db.write() as conn:
            return sum(conn.execute(statement, (before_ms,)).rowcount for statement in PURGE_COUNTERS)

    def close(self) -> None:
        self._db.close()
