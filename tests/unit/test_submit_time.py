"""A report's submitTime on the embedded profile: taken once its write holds the index's lock."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from adapters.factory import Adapters
from ports import IndexEntry, ReportFilter
from ports.timeutil import now_ms


def test_a_report_is_stamped_once_its_write_holds_the_lock(adapters: Adapters, tmp_path: Path) -> None:
    # found from outside: the time was taken before the write waited for the lock (another
    # consumer's write, a reader's checkpoint), so a report became readable well after its
    # submitTime and a client polling from its last poll missed it
    assert adapters.index.find(ReportFilter(sku="game:pc", limit=10)) == []  # the file, made on first use
    other = sqlite3.connect(tmp_path / "data" / "index.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    writing = threading.Thread(target=adapters.index.insert_many, args=([
        IndexEntry(report_key="k", event_id="e", sku="game:pc", received_at=1, size_bytes=1)],))
    writing.start()
    time.sleep(0.3)  # the write is waiting for the lock
    released = now_ms()
    other.execute("COMMIT")
    writing.join()
    [report] = adapters.index.find(ReportFilter(sku="game:pc", limit=10))
    assert report.submit_time >= released
