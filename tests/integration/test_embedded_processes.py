"""The embedded adapters are shared by processes (serve, `blackbox invoke`, a second tool) through
SQLite's file locking: concurrent writers in separate processes lose nothing."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase
from adapters.embedded.log import SqliteEventLog
from adapters.spill.directory import DirectorySpillStore
from pipeline import topics
from ports import IndexEntry, OutgoingRecord, ReportFilter
from ports.errors import StoreUnavailable

PER_PROCESS = 100


def publish_and_index(data_dir: str, worker: int) -> None:
    log = SqliteEventLog(Path(data_dir) / "log.sqlite")
    index = SqliteCrashIndex(SqliteIndexDatabase(Path(data_dir) / "index.sqlite"))
    for i in range(PER_PROCESS):
        log.publish("t", [OutgoingRecord(value=f"{worker}-{i}".encode(), key=str(i).encode())])
        index.insert_many([IndexEntry(f"{worker}-{i}", "e", "g", 0, 1)])


def test_writers_in_several_processes_lose_nothing(tmp_path: Path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=publish_and_index, args=(str(tmp_path), w)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
        assert p.exitcode == 0
    log = SqliteEventLog(tmp_path / "log.sqlite")
    values = []
    consumer = log.consumer("g", "t")
    while batch := consumer.poll(1000, 1 << 30, timeout_s=0):
        values += [r.value for r in batch]
    assert sorted(values) == sorted(f"{w}-{i}".encode() for w in range(3) for i in range(PER_PROCESS))
    index = SqliteCrashIndex(SqliteIndexDatabase(tmp_path / "index.sqlite"))
    ids = [r.report_id for r in index.find(ReportFilter(sku="g", limit=1000))]
    assert len(ids) == 3 * PER_PROCESS == len(set(ids))


def test_capture_spills_what_the_log_does_not_take_within_its_bound_rather_than_wait(tmp_path: Path):
    """docs/architecture.md: an event the log has not taken within 2 s is spilled, and acknowledged. Another
    process holding the log's write lock for long (a tool, a purge) must not hold capture for
    SQLite's busy timeout of 30 s: here it holds the lock 10 s, and capture must not outwait it."""
    log, spill = SqliteEventLog(tmp_path / "log.sqlite"), DirectorySpillStore(tmp_path / "spill")
    holder = sqlite3.connect(tmp_path / "log.sqlite", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(10, holder.execute, ("ROLLBACK",))
    release.start()
    try:
        topics.publish(log, spill, "t", [OutgoingRecord(b"held")])
        spilled = [r.record.value for r in spill.list(10)]
    finally:
        release.join()
    assert spilled == [b"held"]


def test_a_publish_queued_behind_a_waiting_one_waits_no_longer_than_its_own_bound(tmp_path: Path):
    """Found by review: group commit queued a publish behind one waiting for the lock, and it then
    waited a whole bound of its own: up to twice the bound in all. Each waits its own from its call:
    here A (called at 0) fails at 4 s, B (called at 2) at 6, before the lock is freed at 7."""
    log = SqliteEventLog(tmp_path / "log.sqlite", publish_timeout_s=4)
    holder = sqlite3.connect(tmp_path / "log.sqlite", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(7, holder.execute, ("ROLLBACK",))
    release.start()
    outcomes: dict[str, str] = {}

    def publish(name: str) -> None:
        try:
            log.publish("t", [OutgoingRecord(name.encode())])
            outcomes[name] = "published"
        except StoreUnavailable:
            outcomes[name] = "refused"

    first = threading.Thread(target=publish, args=("a",))
    first.start()
    threading.Event().wait(2)
    second = threading.Thread(target=publish, args=("b",))
    second.start()
    for thread in (first, second):
        thread.join()
    release.join()
    assert outcomes == {"a": "refused", "b": "refused"}


def test_the_logs_partitions_are_the_files_whatever_a_process_is_set_to(tmp_path: Path):
    """Found from outside: each process took its own BLACKBOX_LOG_PARTITIONS as the embedded log's,
    so a serve restarted with fewer left the records of the others unread for ever, and one with
    more (or a `blackbox replay` beside it set otherwise) put a board's new scores in another
    partition than its waiting ones, to be applied before them."""
    made = SqliteEventLog(tmp_path / "log.sqlite", partitions=8)
    made.publish("t", [OutgoingRecord(value=str(n).encode(), key=f"board-{n}".encode()) for n in range(40)])
    for asked in (4, 16):
        reopened = SqliteEventLog(tmp_path / "log.sqlite", partitions=asked)
        assert reopened.partitions == 8
        consumer = reopened.consumer(f"g{asked}", "t")
        values = []
        while batch := consumer.poll(1000, 1 << 30, timeout_s=0):
            values += [r.value for r in batch]
        assert sorted(values, key=int) == [str(n).encode() for n in range(40)]
    # a file made before the count was kept holds it in its records
    older = tmp_path / "older.sqlite"
    SqliteEventLog(older, partitions=6).publish("t", [OutgoingRecord(b"x", f"k{n}".encode()) for n in range(60)])
    with sqlite3.connect(older) as conn:
        conn.execute("DELETE FROM settings")
    assert SqliteEventLog(older, partitions=4).partitions == 6
