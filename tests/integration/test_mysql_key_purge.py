"""MySQL keeps a report's key apart from the report (report_keys: the partitioned reports table
cannot hold a unique key on it). Retention must forget a key with its report and no other: a key
row forgotten while its report stays lets a resend of that report in again, indexed twice
(docs/architecture.md's rules, count none twice). The purge once deleted the keys below an id bound it read between
two statements, so a report indexed between those two reads lost its key."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from adapters.mysql.database import MysqlDatabase
from adapters.mysql.index import MysqlCrashIndex
from ports import IndexEntry, ReportFilter
from ports.timeutil import now_ms
from tests.services import mysql_database, namespace

pytestmark = pytest.mark.services  # on the engines of scripts/services

# more steps than a purge takes: the last rounds insert after it ended
STEPS = 10


def _entry(key: int) -> IndexEntry:
    return IndexEntry(report_key=f"{key:032x}", event_id=f"e{key}", sku="game:pc", received_at=1, size_bytes=1)


class _InsertAfterStep:
    """The index's database, which runs `insert` once, right after the purge's `step`-th call to it."""

    def __init__(self, database: MysqlDatabase, step: int, insert: Callable[[], None]) -> None:
        self._database, self._step, self._insert, self._calls = database, step, insert, 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._database, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            result = found(*args, **kwargs)
            self._calls += 1
            if self._calls == self._step:
                self._insert()
            return result
        return call


@pytest.mark.parametrize("emptied", [True, False], ids=["emptied", "some-kept"])
def test_a_report_indexed_while_the_purge_runs_keeps_its_key(emptied: bool) -> None:
    with mysql_database(namespace()) as database:
        index = MysqlCrashIndex(database)
        for step in range(1, STEPS + 1):
            old, kept, arriving = 1_000 * step, 1_000 * step + 1, 1_000 * step + 2
            index.insert_many([_entry(old)])
            time.sleep(0.002)
            cut = now_ms()
            time.sleep(0.002)
            if not emptied:
                index.insert_many([_entry(kept)])
            indexing = functools.partial(index.insert_many, [_entry(arriving)])
            purging = MysqlCrashIndex(cast(MysqlDatabase, _InsertAfterStep(database, step, indexing)))
            assert purging.purge(cut) == 1
            index.insert_many([_entry(arriving)])  # the client's resend, or the consumer's redelivery
            found = [r.entry.event_id for r in index.find(ReportFilter(sku="game:pc", limit=100))
                     if r.entry.report_key == _entry(arriving).report_key]
            assert found == [f"e{arriving}"], f"inserted after step {step} of the purge"
            index.purge(now_ms() + 1)  # the next round starts from an empty index


def test_the_migration_gives_each_key_its_reports_submit_time_orphans_zero_and_new_ones_now() -> None:
    with mysql_database(namespace()) as database:
        index = MysqlCrashIndex(database)
        index.insert_many([_entry(1), _entry(2)])
        # back to the keys before 0010, one of them left by an earlier purge without its report
        database.run("DELETE FROM reports WHERE report_key = %s", (_entry(2).report_key,))
        database.run("ALTER TABLE report_keys DROP INDEX report_keys_submit, DROP COLUMN submit_time", ())
        database.run("DELETE FROM schema_migrations WHERE version = %s", ("0010_report_key_times.sql",))
        database.connection().commit()
        assert database.migrate() == ["0010_report_key_times.sql"]
        times: dict[str, int] = dict(database.run("SELECT report_key, submit_time FROM report_keys", ()))
        (report,) = index.find(ReportFilter(sku="game:pc", limit=10))
        assert times == {_entry(1).report_key: report.submit_time, _entry(2).report_key: 0}
        assert index.purge(1) == 0
        index.insert_many([_entry(1), _entry(2)])  # the orphan's key went; the kept report's stayed
        assert [r.entry.event_id for r in index.find(ReportFilter(sku="game:pc", limit=10))] == ["e1", "e2"]
        # a writer from before 0010, as a deployment's old functions run while it is applied
        database.run("INSERT INTO report_keys (report_key) VALUES (%s)", (_entry(3).report_key,))
        database.connection().commit()
        (inserted,) = database.run("SELECT submit_time FROM report_keys WHERE report_key = %s",
                                   (_entry(3).report_key,))[0]
        assert abs(inserted - now_ms()) < 60_000
