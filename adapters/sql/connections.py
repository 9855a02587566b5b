"""A connection per thread (database connections are not thread-safe), reused by that thread
across calls and Lambda invocations, and all closed together."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar


class _Closable(Protocol):
    def close(self) -> Any: ...


C = TypeVar("C", bound=_Closable)


class PerThread(Generic[C]):
    def __init__(self, connect: Callable[[], C]) -> None:
        self._connect = connect
        self._local = threading.local()
        self._all: list[C] = []
        self._lock = threading.Lock()

    def get(self) -> tuple[C, float]:
        """This thread's connection, and how long since this thread last asked (inf when new)."""
        now = time.monotonic()
        conn: C | None = getattr(self._local, "conn", None)
        idle = float("inf") if conn is None else now - self._local.used
        if conn is None:
            conn = self.renew()
        self._local.used = now
        return conn, idle

    def renew(self) -> C:
        """A new connection for this thread (the old one broke, and is let go)."""
        old: C | None = getattr(self._local, "conn", None)
        conn = self._connect()
        self._local.conn = conn
        with self._lock:
            if old is not None and old in self._all:
                self._all.remove(old)
            self._all.append(conn)
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        return conn

    def close_all(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
