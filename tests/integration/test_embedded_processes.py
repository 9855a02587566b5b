"""The embedded adapters are shared by processes (serve, `blackbox invoke`, a second tool) through
SQLite's file locking: concurrent writers in separate processes lose nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase
from adapters.embedded.log import SqliteEventLog
from ports import IndexEntry, OutgoingRecord, ReportFilter

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
