"""A durable, partitioned event log on SQLite with Kafka's semantics: per-partition offsets,
consumer groups with committed positions, at-least-once delivery until a commit."""

from __future__ import annotations

import json
import random
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.embedded.sqlite import SqliteFile, sqlite_meaning
from adapters.errors import port_errors
from ports import PUBLISH_TIMEOUT_S, Headers, LogRecord, OutgoingRecord
from ports.telemetry import logger
from ports.timeutil import now_ms


def _encode_headers(headers: Headers) -> str:
    return json.dumps([[name, value.hex()] for name, value in headers])


def _decode_headers(text: str) -> Headers:
    return tuple((name, bytes.fromhex(value)) for name, value in json.loads(text))


_SELECT_RECORDS = "SELECT offset, key, value, headers, timestamp_ms FROM records"


def _record(topic: str, partition: int, row: tuple[int, bytes | None, bytes, str, int]) -> LogRecord:
    """A record from its row of _SELECT_RECORDS."""
    offset, key, value, headers, timestamp_ms = row
    return LogRecord(topic, partition, offset, bytes(value), None if key is None else bytes(key),
                     _decode_headers(headers), timestamp_ms)


@dataclass
class _Pending:
    topic: str
    records: Sequence[OutgoingRecord]
    # monotonic: when its publish gives up waiting for the log, counted from its call
    deadline: float
    done: bool = False
    error: BaseException | None = None


@port_errors("log", sqlite_meaning)
class SqliteEventLog:
    def __init__(self, path: Path, partitions: int = 4, publish_timeout_s: float = PUBLISH_TIMEOUT_S) -> None:
        """`partitions`: the count a log made now takes; one made before keeps its own."""
        self._db = SqliteFile(path, "log")
        self.partitions = self._kept_partitions(partitions)
        self._timeout = publish_timeout_s
        # wakes consumers in this process as soon as something is published
        self._published = threading.Condition()
        self._queue: list[_Pending] = []
        self._queue_lock = threading.Lock()
        self._commit_lock = threading.Lock()

    def _kept_partitions(self, asked: int) -> int:
        count = "SELECT value FROM settings WHERE name = 'partitions'"
        # read first: every process opens the log, and a write would wait behind capture's appends
        row = self._db.connection().execute(count).fetchone()
        if row is None:
            with self._db.write() as conn:
                row = conn.execute(count).fetchone()  # another process may have kept it meanwhile
                if row is None:
                    # a file made before the count was kept: as many as its records name (purge keeps
                    # each partition's newest), or the count asked of an empty one
                    (named,) = conn.execute("SELECT COALESCE(MAX(partition) + 1, 0) FROM records").fetchone()
                    row = (int(named) or asked,)
                    conn.execute("INSERT INTO settings (name, value) VALUES ('partitions', ?)", row)
        kept = int(row[0])
        if kept != asked:
            logger.warning("the embedded log keeps the partitions it was made with, not BLACKBOX_LOG_PARTITIONS",
                           extra={"partitions": kept, "asked": asked})
        return kept

    def _partition_for(self, key: bytes | None) -> int:
        if key is None:
            return random.randrange(self.partitions)
        return zlib.crc32(key) % self.partitions

    def publish(self, topic: str, records: Sequence[OutgoingRecord]) -> None:
        """Group commit: publishers that arrive while a commit is under way are written together in
        the next one, so concurrent requests share one fsync instead of queueing for one each."""
        pending = _Pending(topic, records, time.monotonic() + self._timeout)
        with self._queue_lock:
            self._queue.append(pending)
        with self._commit_lock:
            if not pending.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                try:
                    self._write(batch)
                except BaseException as exc:
                    for item in batch:
                        item.error = exc
                    raise
                finally:
                    for item in batch:
                        item.done = True
        if pending.error is not None:
            raise pending.error
        with self._published:
            self._published.notify_all()

    def _write(self, batch: Sequence[_Pending]) -> None:
        timestamp = now_ms()
        # while another process holds the file (a tool, a long purge) capture spills instead: a
        # batch waits until the first of its publishes is due, however long it queued for its turn
        wait_s = max(0.0, min(item.deadline for item in batch) - time.monotonic())
        with self._db.write(wait_s) as conn:
            next_offsets: dict[tuple[str, int], int] = {}
            rows = []
            for item in batch:
                for record in item.records:
                    partition = self._partition_for(record.key)
                    if (item.topic, partition) not in next_offsets:
                        (last,) = conn.execute(
                            "SELECT COALESCE(MAX(offset), -1) FROM records WHERE topic = ? AND partition = ?",
                            (item.topic, partition),
                        ).fetchone()
                        next_offsets[item.topic, partition] = last + 1
                    offset = next_offsets[item.topic, partition]
                    next_offsets[item.topic, partition] = offset + 1
                    rows.append((item.topic, partition, offset, record.key, record.value,
                                 _encode_headers(record.headers), timestamp))
            conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def consumer(self, group: str, topic: str) -> SqliteLogConsumer:
        return SqliteLogConsumer(self, group, topic)

    def read(self, topic: str, partition: int, offset: int) -> LogRecord | None:
        row = self._db.connection().execute(
            f"{_SELECT_RECORDS} WHERE topic = ? AND partition = ? AND offset = ?", (topic, partition, offset),
        ).fetchone()
        return None if row is None else _record(topic, partition, row)

    def purge(self, topics: Sequence[str], before_ms: int, readers: Mapping[str, str] | None = None) -> int:
        # each partition keeps its newest record: publish numbers the next offset after it
        readers = readers or {}
        with self._db.write() as conn:
            return sum(
                conn.execute(
                    "DELETE FROM records WHERE topic = ? AND timestamp_ms < ? AND offset < "
                    "(SELECT MAX(offset) FROM records AS newest WHERE newest.topic = records.topic "
                    "AND newest.partition = records.partition) AND (? IS NULL OR offset < COALESCE("
                    "(SELECT next_offset FROM commits WHERE grp = ? AND commits.topic = records.topic "
                    "AND commits.partition = records.partition), 0))",
                    (topic, before_ms, readers.get(topic), readers.get(topic)),
                ).rowcount
                for topic in topics
            )

    def end_offsets(self, topic: str) -> dict[int, int]:
        # purge keeps each partition's newest record, so MAX(offset) is still the last one published
        rows = self._db.connection().execute(
            "SELECT partition, MAX(offset) + 1 FROM records WHERE topic = ? GROUP BY partition", (topic,)
        )
        return {partition: end for partition, end in rows}

    def start_offsets(self, topic: str) -> dict[int, int]:
        rows = self._db.connection().execute(
            "SELECT partition, MIN(offset) FROM records WHERE topic = ? GROUP BY partition", (topic,))
        return dict(rows)

    def committed(self, group: str, topic: str) -> dict[int, int]:
        rows = self._db.connection().execute(
            "SELECT partition, next_offset FROM commits WHERE grp = ? AND topic = ?", (group, topic))
        return dict(rows)

    def wait_for_publish(self, timeout_s: float) -> None:
        with self._published:
            self._published.wait(timeout_s)

    def ping(self) -> None:
        self._db.ping()

    def close(self) -> None:
        self._db.close()

    @property
    def db(self) -> SqliteFile:
        return self._db


@port_errors("log", sqlite_meaning)
class SqliteLogConsumer:
    def __init__(self, log: SqliteEventLog, group: str, topic: str) -> None:
        self._log = log
        self._group = group
        self._topic = topic
        self._positions: dict[int, int] = {}
        # the partition a batch starts at, in turn: from partition 0 each time, a backlog there
        # would fill every batch while the others waited
        self._turn = 0
        self.rewind()

    def rewind(self) -> None:
        committed = self._log.committed(self._group, self._topic)
        self._positions = {p: committed.get(p, 0) for p in range(self._log.partitions)}

    def _fetch(self, max_records: int, max_bytes: int) -> list[LogRecord]:
        conn = self._log.db.connection()
        batch: list[LogRecord] = []
        size = 0
        partitions = sorted(self._positions)
        self._turn = (self._turn + 1) % len(partitions)
        for partition in partitions[self._turn:] + partitions[:self._turn]:
            position = self._positions[partition]
            if len(batch) >= max_records or (batch and size >= max_bytes):
                break
            rows = conn.execute(
                f"{_SELECT_RECORDS} WHERE topic = ? AND partition = ? AND offset >= ? ORDER BY offset LIMIT ?",
                (self._topic, partition, position, max_records - len(batch)),
            )
            for row in rows:
                record = _record(self._topic, partition, row)
                if batch and size + len(record.value) > max_bytes:
                    break
                batch.append(record)
                size += len(record.value)
                self._positions[partition] = record.offset + 1
        return batch

    def poll(self, max_records: int, max_bytes: int, timeout_s: float) -> list[LogRecord]:
        batch = self._fetch(max_records, max_bytes)
        if not batch and timeout_s > 0:
            # another process may publish too: the wait is bounded, then we look again
            self._log.wait_for_publish(timeout_s)
            batch = self._fetch(max_records, max_bytes)
        return batch

    def commit(self, records: Sequence[LogRecord]) -> None:
        next_offsets: dict[int, int] = {}
        for record in records:
            next_offsets[record.partition] = max(next_offsets.get(record.partition, 0), record.offset + 1)
        with self._log.db.write() as conn:
            conn.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?) ON CONFLICT (grp, topic, partition) "
                "DO UPDATE SET next_offset = MAX(next_offset, excluded.next_offset)",
                [(self._group, self._topic, p, o) for p, o in next_offsets.items()],
            )

    def close(self) -> bool:
        """Positions live in the database, each commit in it as it returned; nothing to release
        beyond the shared connections."""
        return True
