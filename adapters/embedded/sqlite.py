"""A SQLite database file shared safely by threads (a connection each) and processes (WAL,
busy timeout, immediate write transactions)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class SqliteFile:
    def __init__(self, path: Path, schema: str, synchronous: str = "FULL") -> None:
        self.path = path
        self._synchronous = synchronous
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        # executescript manages its own transaction; every statement is CREATE ... IF NOT EXISTS
        self.connection().executescript(schema)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # autocommit mode (isolation_level=None): transactions are explicit below
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk before we acknowledge anything that depends on it
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """An immediate transaction: takes the write lock up front, so read-then-write is atomic."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def ping(self) -> None:
        self.connection().execute("SELECT 1").fetchone()

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
