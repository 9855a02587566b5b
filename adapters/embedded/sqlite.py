"""A SQLite database file shared safely by threads (a connection each) and processes (WAL,
busy timeout, immediate write transactions)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from adapters.errors import Meaning
from adapters.sql import migrations
from adapters.sql.connections import PerThread
from ports.telemetry import logger

_WAL_ATTEMPTS = 100
# how long a statement waits for a lock another connection holds (a write, a checkpoint)
BUSY_TIMEOUT_S = 30.0
# the primary result codes (sqlite.org/rescode.html) of a file that cannot be used now but may be
# later: busy, locked, out of memory, disk I/O, disk full, cannot open, lock protocol
_UNAVAILABLE_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_IOERR,
                      sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL}


def _primary_code(error: sqlite3.Error) -> int:
    # -1: an error this module raised of its own (no result code), e.g. a closed database
    return getattr(error, "sqlite_errorcode", -1) & 0xFF


def sqlite_meaning(error: BaseException) -> Meaning | None:
    """SQLite's errors in the ports' words (adapters.errors)."""
    if isinstance(error, sqlite3.IntegrityError | sqlite3.DataError):
        return Meaning.VALUE
    if isinstance(error, sqlite3.OperationalError) and _primary_code(error) in _UNAVAILABLE_CODES:
        return Meaning.UNAVAILABLE
    return None


MIGRATIONS = resources.files("adapters.embedded") / "migrations"


# the schema MySQL holds too: its changes are shared migrations
INDEX = "index"


class SqliteFile:
    def __init__(self, path: Path, schema: str, legacy_columns: Sequence[tuple[str, str, str]] = (),
                 synchronous: str = "FULL") -> None:
        """`schema`: the folder of migrations/ this file's are in (the index's also takes the shared
        ones, adapters.sql.migrations). `legacy_columns`: (table, column, type) that a file made
        before versioned migrations may lack (CREATE TABLE IF NOT EXISTS left its tables as they were)."""
        self.path = path
        self._synchronous = synchronous
        self._connections = PerThread(self._connect)
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = MIGRATIONS / schema
        pending = migrations.index_migrations(folder) if schema == INDEX else migrations.migrations(folder)
        self.applied = self._migrate(pending, legacy_columns)
        if self.applied:
            logger.info("applied migrations", extra={"path": str(path), "migrations": self.applied})

    def _migrate(self, pending: Sequence[migrations.Migration],
                 legacy_columns: Sequence[tuple[str, str, str]]) -> list[str]:
        """Applies the migrations this file lacks, all in one write transaction: SQLite's DDL is
        transactional, so a failing one leaves the file as it was; and the processes of one serve
        that open it at once take turns, each seeing what the one before applied."""
        applied: list[str] = []
        with self.write() as conn:
            conn.execute(migrations.CREATE_TABLE)
            done = {row[0] for row in conn.execute(migrations.SELECT_APPLIED)}
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not done and tables - {"schema_migrations"}:
                # made before versioned migrations: it has the first one's tables, short of columns
                first = pending[0]
                for statement in first.statements:  # each CREATE ... IF NOT EXISTS
                    conn.execute(statement)
                for table, column, kind in legacy_columns:
                    if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                conn.execute(migrations.RECORD.on("sqlite").text, (first.name,))
                done.add(first.name)
            for migration in pending:
                if migration.name not in done:
                    for statement in migration.statements:
                        conn.execute(statement)
                    conn.execute(migrations.RECORD.on("sqlite").text, (migration.name,))
                    applied.append(migration.name)
        return applied

    def _connect(self) -> sqlite3.Connection:
        # autocommit mode (isolation_level=None): transactions are explicit below
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        # switching a new file to WAL needs an exclusive lock, and SQLite answers "locked" at once
        # (no busy handler) while another process does the same: wait for it
        for attempt in range(_WAL_ATTEMPTS):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if _primary_code(exc) != sqlite3.SQLITE_LOCKED or attempt == _WAL_ATTEMPTS - 1:
                    raise
                time.sleep(0.1)
        # FULL: a commit is on disk before we acknowledge anything that depends on it
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        return conn

    def connection(self) -> sqlite3.Connection:
        return self._connections.get()[0]

    @contextmanager
    def write(self, wait_s: float = BUSY_TIMEOUT_S) -> Iterator[sqlite3.Connection]:
        """An immediate transaction: takes the write lock up front, so read-then-write is atomic.
        Waits for it `wait_s` at most while another connection holds it."""
        conn = self.connection()
        bounded = wait_s != BUSY_TIMEOUT_S
        try:
            if bounded:
                conn.execute(f"PRAGMA busy_timeout={max(0, int(wait_s * 1000))}")
            conn.execute("BEGIN IMMEDIATE")
        finally:
            if bounded:
                conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            # a COMMIT that failed (a deferred constraint, a busy checkpoint) may leave it open
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A deferred transaction: in WAL mode its reads all see the file as of its first read."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("COMMIT")

    def ping(self) -> None:
        self.connection().execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._connections.close_all()
