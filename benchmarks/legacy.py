"""The paper's Legacy CRS, for comparison in the same run: a collector that inserts each report
into MySQL (SQLite on the embedded profile) before it answers. Same web stack as Blackbox's
gateway (uvicorn, a pool of worker threads), so the difference is the design, not the server.

    python -m benchmarks.legacy --port 8090 [--workers N] --mysql-url mysql://… | --sqlite PATH
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvicorn

from adapters.mysql.database import MysqlDatabase
from ports.timeutil import now_ms

Message = MutableMapping[str, Any]
_MYSQL_VARIABLE, _SQLITE_VARIABLE = "LEGACY_MYSQL_URL", "LEGACY_SQLITE"
_MYSQL_TABLE = (
    "CREATE TABLE IF NOT EXISTS legacy_reports (report_id BIGINT AUTO_INCREMENT PRIMARY KEY, "
    "sku VARCHAR(64) NOT NULL, received_at BIGINT NOT NULL, body LONGBLOB NOT NULL, KEY (sku, report_id))"
)
_SQLITE_TABLE = (
    "CREATE TABLE IF NOT EXISTS legacy_reports (report_id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "sku TEXT NOT NULL, received_at INTEGER NOT NULL, body BLOB NOT NULL)"
)


class _Store:
    """One insert a report, committed before the answer."""

    def __init__(self, mysql_url: str | None, sqlite_path: Path | None) -> None:
        self._mysql = MysqlDatabase(mysql_url) if mysql_url else None
        self._sqlite_path = sqlite_path
        self._local = threading.local()
        if self._mysql is not None:
            self._mysql.migrate()
            with self._mysql.connection().cursor() as cursor:
                cursor.execute(_MYSQL_TABLE)
        else:
            self._sqlite().execute(_SQLITE_TABLE)

    def _sqlite(self) -> sqlite3.Connection:
        if not hasattr(self._local, "conn"):
            assert self._sqlite_path is not None
            fresh = sqlite3.connect(self._sqlite_path, isolation_level=None, timeout=30)
            fresh.execute("PRAGMA journal_mode=WAL")
            fresh.execute("PRAGMA synchronous=FULL")
            self._local.conn = fresh
        conn: sqlite3.Connection = self._local.conn
        return conn

    def insert(self, sku: str, body: bytes) -> int:
        if self._mysql is not None:
            with self._mysql.connection().cursor() as cursor:
                cursor.execute("INSERT INTO legacy_reports (sku, received_at, body) VALUES (%s, %s, %s)",
                               (sku, now_ms(), body))
                return int(cursor.lastrowid)
        inserted = self._sqlite().execute("INSERT INTO legacy_reports (sku, received_at, body) VALUES (?, ?, ?)",
                                          (sku, now_ms(), body))
        return int(inserted.lastrowid or 0)


async def read_body(receive: Callable[[], Awaitable[Message]]) -> bytes:
    """An ASGI request's whole body."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


class LegacyCollector:
    def __init__(self, store: _Store, workers: int = 32) -> None:
        self._store = store
        self._executor = ThreadPoolExecutor(max_workers=workers)

    def _handle(self, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            report = json.loads(body)
            sku = report["sku"]
        except (ValueError, KeyError, TypeError):
            return 400, {"error": "invalid_json", "message": "not a crash report"}
        return 202, {"reportId": self._store.insert(str(sku), body)}

    async def __call__(self, scope: Message, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        status, answer = await asyncio.get_running_loop().run_in_executor(self._executor, self._handle,
                                                                          await read_body(receive))
        payload = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def from_environment() -> LegacyCollector:
    """The app of each worker process, from what main() put in the environment it inherits."""
    sqlite = os.environ.get(_SQLITE_VARIABLE)
    return LegacyCollector(_Store(os.environ.get(_MYSQL_VARIABLE), Path(sqlite) if sqlite else None))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mysql-url")
    parser.add_argument("--sqlite", type=Path)
    args = parser.parse_args()
    os.environ[_MYSQL_VARIABLE if args.mysql_url else _SQLITE_VARIABLE] = args.mysql_url or str(args.sqlite)
    _Store(args.mysql_url, args.sqlite)  # the table, made once before the workers race to make it
    uvicorn.run("benchmarks.legacy:from_environment", factory=True, host="127.0.0.1", port=args.port,
                workers=args.workers, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
