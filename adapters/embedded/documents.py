"""Document store on SQLite: key → bytes with an expiry, like a Couchbase bucket."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.embedded.sqlite import SqliteFile, sqlite_meaning
from adapters.errors import port_errors
from ports.timeutil import now_ms

# SQLite allows 32766 host parameters; stay well below
_CHUNK = 500


@port_errors("documents", sqlite_meaning)
class SqliteDocumentStore:
    def __init__(self, path: Path) -> None:
        self._db = SqliteFile(path, "documents")

    def upsert_many(self, documents: Mapping[str, bytes], ttl_seconds: int) -> None:
        expires_at = now_ms() + ttl_seconds * 1000
        with self._db.write() as conn:
            conn.executemany(
                "INSERT INTO documents (key, body, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at",
                [(key, body, expires_at) for key, body in documents.items()],
            )

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        conn = self._db.connection()
        now = now_ms()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT key, body FROM documents WHERE key IN ({marks}) AND expires_at > ?", (*chunk, now)
            )
            found.update((key, bytes(body)) for key, body in rows)
        return found

    def delete_many(self, keys: Sequence[str]) -> None:
        with self._db.write() as conn:
            conn.executemany("DELETE FROM documents WHERE key = ?", [(key,) for key in keys])

    def purge_expired(self) -> int:
        with self._db.write() as conn:
            return conn.execute("DELETE FROM documents WHERE expires_at <= ?", (now_ms(),)).rowcount

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()

    @property
    def db(self) -> SqliteFile:
        return self._db
