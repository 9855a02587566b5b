"""The crash index and the session counters on SQLite (MySQL's role in production)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.embedded.sqlite import INDEX, SqliteFile, sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.projects import SqlProjectStore
from adapters.sql.queries import (
    INCREMENT_SESSIONS,
    PURGE_AWAITING,
    PURGE_COUNTERS,
    PURGE_REPORTS,
    entry_values,
    first_of_each_key,
    report_ids,
)
from adapters.sql.reads import CrashIndexReads, SessionCounterReads, SqlDatabase, Transaction
from adapters.sql.releases import ReleaseReads, apply_releases, purge_statements
from adapters.sql.schema import BODY_HASH, INSERT_COLUMNS, reports
from adapters.sql.statements import Rows, Statement, insert, text
from ports import Checkpoint, IndexEntry, SessionBucket
from ports.releases import NO_RELEASES, ReleaseIncrements
from ports.timeutil import now_ms

# columns added before migrations were versioned: a data directory of those releases gets them when
# first opened by this one (what comes later is a migration of migrations/index/)
_LEGACY_COLUMNS = (
    ("reports", "body_hash", "TEXT"),
    ("applied_events", "body_hash", "TEXT"),
    ("applied_offsets", "fingerprint", "TEXT"),
)


def _skus_seen(table: str, time_column: str) -> Statement:
    """The skus of a table by name after one, with the latest `time_column` of each. SQLite has no
    loose index scan (GROUP BY sku read every row of each sku), so this steps from sku to sku with
    one (sku, time) index seek each, and one more for the sku's latest time."""
    return text(
        "WITH RECURSIVE found (sku, n) AS ("
        f"SELECT MIN(sku), 1 FROM {table} WHERE sku > :after "
        f"UNION ALL SELECT (SELECT MIN(t.sku) FROM {table} t WHERE t.sku > found.sku), n + 1 FROM found "
        "WHERE found.sku IS NOT NULL AND n < :limit) "
        f"SELECT sku, (SELECT MAX(t.{time_column}) FROM {table} t WHERE t.sku = found.sku) FROM found "
        "WHERE sku IS NOT NULL"
    )


# a key already indexed is skipped: its row went in with it
_INSERT_REPORTS = insert(reports, (*INSERT_COLUMNS, BODY_HASH), keys=("report_key",))


class SqliteIndexDatabase(SqlDatabase):
    """One file holds the crash index, the counters and the leaderboards, as one MySQL schema does."""

    ENGINE = "sqlite"

    def __init__(self, path: Path) -> None:
        self.db = SqliteFile(path, INDEX, _LEGACY_COLUMNS)

    def run(self, sql: str, params: Sequence[Any]) -> Rows:
        return self.db.connection().execute(sql, params).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self.db.write() as conn:
            yield Transaction(conn.cursor(), self.ENGINE)

    def close(self) -> None:
        self.db.close()


@port_errors("index", sqlite_meaning)
class SqliteCrashIndex(CrashIndexReads):
    SKUS = _skus_seen("reports", "received_at")
    KEYS = reports

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def insert_many(self, entries: Sequence[IndexEntry],
                    body_hashes: Mapping[str, str | None] | None = None) -> list[IndexEntry]:
        hashes = body_hashes or {}
        unique = first_of_each_key(entries)
        if not unique:
            return []
        with self._database.transaction() as t:
            # the write transaction holds the file: no other can index a key between the read and the write
            known = {key for key, _ in t.rows(*report_ids(reports, [e.report_key for e in unique]))}
            fresh = [e for e in unique if e.report_key not in known]
            # once the write holds the lock: it may wait for it, and readable is what the time says
            submit_time = now_ms()
            t.execute_rows(_INSERT_REPORTS,
                           [(*entry_values(e, None, submit_time), hashes.get(e.report_key)) for e in fresh])
        return fresh

    def purge(self, before_ms: int) -> int:
        # AUTOINCREMENT: a purged reportId is never handed out again
        with self._database.transaction() as t:
            t.execute(PURGE_AWAITING, {"before": before_ms})
            return t.execute(PURGE_REPORTS, {"before": before_ms})

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()


@port_errors("counters", sqlite_meaning)
class SqliteSessionCounters(SessionCounterReads, ReleaseReads):
    SKUS = _skus_seen("session_counts", "minute")
    _database: SqliteIndexDatabase

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def apply(self, checkpoint: Checkpoint, increments: Mapping[SessionBucket, int],
              releases: ReleaseIncrements = NO_RELEASES) -> None:
        with self._database.checkpoint_transaction(checkpoint) as t:
            t.execute_rows(INCREMENT_SESSIONS, [(b.sku, b.minute, b.kind, n) for b, n in increments.items()])
            apply_releases(t, releases)

    def purge(self, before_ms: int) -> int:
        with self._database.transaction() as t:
            return (sum(t.execute(statement, {"before": before_ms}) for statement in PURGE_COUNTERS)
                    + sum(t.execute(statement, {"before": before})
                          for statement, before in purge_statements(before_ms)))

    def close(self) -> None:
        self._db.close()


@port_errors("projects", sqlite_meaning)
class SqliteProjectStore(SqlProjectStore):
    """Beside the crash index, in its file."""
