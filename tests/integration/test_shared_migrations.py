"""A shared migration (adapters/sql/shared/) on MariaDB: applied after MySQL's own, once, and run
again when it was cut off midway (MySQL commits each DDL statement by itself), where what it added
already is taken as added; and migrations and day partitions made by several processes at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adapters.mysql import database as database_module
from adapters.mysql.database import MysqlDatabase
from adapters.sql import migrations
from tests.at_once import at_once
from tests.services import drop_database, mysql_database, mysql_url, namespace
from tests.unit.test_migrations import SHARED_GPU

pytestmark = pytest.mark.services  # on the engines of scripts/services


def test_a_shared_migration_is_applied_once_and_again_when_cut_off(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    with mysql_database(namespace()) as database:
        shared = tmp_path / "shared"
        shared.mkdir()
        (shared / "0001_gpu.sql").write_text(SHARED_GPU)
        monkeypatch.setattr(migrations, "SHARED", shared)
        assert database.migrate() == ["shared/0001_gpu.sql"]
        assert database.migrate() == []
        assert ("gpu",) in database.run("SELECT column_name FROM information_schema.columns "
                                        "WHERE table_schema = DATABASE() AND table_name = 'reports'", ())
        # cut off after its statements, before its record: the next run finishes it
        database.run("DELETE FROM schema_migrations WHERE version = %s", ("shared/0001_gpu.sql",))
        database.connection().commit()
        assert database.migrate() == ["shared/0001_gpu.sql"]


def test_a_migration_longer_than_a_reads_timeout_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Found in review: the migration files ran on the store's connection, whose reads time out at
    30 s, which a large index's rebuild (an ADD COLUMN, an UPDATE of every row) outlasts."""
    with mysql_database(namespace()) as database:
        shared = tmp_path / "shared"
        shared.mkdir()
        (shared / "0001_slow.sql").write_text("DO SLEEP(2);\n")  # longer than the read timeout below
        monkeypatch.setattr(migrations, "SHARED", shared)
        monkeypatch.setattr(database_module, "READ_TIMEOUT_S", 1.0)
        database.close()  # its connections dial again, with that timeout
        assert database.migrate() == ["shared/0001_slow.sql"]


def test_serves_that_migrate_at_once_apply_each_migration_once_and_all_start():
    """Found by a probe of docs/scale-out.md: three `blackbox migrate` (or serves) at once on an
    empty database, and two exited 1 on the record's duplicate key, as any pending migration of a
    rolling upgrade would have them."""
    name = namespace()
    databases = [MysqlDatabase(mysql_url(name)) for _ in range(3)]
    try:
        applied = at_once(3, lambda i: databases[i].migrate())
        everything = [m.name for m in migrations.index_migrations(database_module.MIGRATIONS)]
        assert sorted(applied, key=len) == [[], [], everything]
        recorded = databases[0].run("SELECT version FROM schema_migrations", ())
        assert sorted(row[0] for row in recorded) == sorted(everything)
    finally:
        for database in databases:
            database.close()
        drop_database(name)


def _day_partitions(database: MysqlDatabase) -> int:
    rows = database.run("SELECT COUNT(*) FROM information_schema.partitions WHERE table_schema = DATABASE() "
                        "AND table_name = 'reports' AND partition_name <> 'p_future'", ())
    return int(rows[0][0])


def test_day_partitions_made_at_once_are_made_once():
    """Every consumers machine makes the coming days' partitions (at start, then hourly): made at
    once, the second REORGANIZE found p_future changed under it."""
    with mysql_database(namespace()) as database:
        others = [MysqlDatabase(mysql_url(database.database)) for _ in range(3)]
        try:
            at_once(3, lambda i: others[i].ensure_day_partitions(database_module.DAYS_AHEAD + 5))
            assert _day_partitions(database) >= database_module.DAYS_AHEAD + 6
        finally:
            for other in others:
                other.close()


def test_a_migration_waits_its_turn_and_says_when_none_came(monkeypatch: pytest.MonkeyPatch):
    with mysql_database(namespace()) as database:
        other = MysqlDatabase(mysql_url(database.database))
        monkeypatch.setattr(database_module, "TURN_WAIT_S", 1)
        try:
            with (other.transaction() as t, database_module._turn(t.cursor, "migrations", database.database),
                  pytest.raises(TimeoutError, match="another process has held MySQL's lock on the migrations")):
                database.migrate()
            assert database.migrate() == []  # its turn, once the other let go
        finally:
            other.close()


def test_day_partitions_dropped_at_once_are_dropped_once():
    """The hourly purge of two consumers machines at once: the second DROP PARTITION named
    partitions the first had dropped."""
    with mysql_database(namespace()) as database:
        others = [MysqlDatabase(mysql_url(database.database)) for _ in range(3)]
        try:
            assert at_once(3, lambda i: others[i].drop_day_partitions(2**62)) == [0, 0, 0]  # rows they held
            assert _day_partitions(database) == 0
        finally:
            for other in others:
                other.close()


def test_day_partitions_wait_a_turn_longer_than_a_reads_timeout(monkeypatch: pytest.MonkeyPatch):
    """Found in review: the partitions' turn was waited for on the store's pooled connection, whose
    reads time out at 30 s: a serve's start behind another machine's long purge lost its connection."""
    with mysql_database(namespace()) as database:
        monkeypatch.setattr(database_module, "READ_TIMEOUT_S", 1.0)
        database.close()  # its connections dial again, with that timeout
        other = MysqlDatabase(mysql_url(database.database))
        holding, done = threading.Event(), threading.Event()

        def hold() -> None:
            with other.connection().cursor() as cursor, database_module._turn(cursor, "day-partitions",
                                                                               database.database):
                holding.set()
                time.sleep(2)  # longer than the read timeout
            done.set()

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert holding.wait(30)
            database.ensure_day_partitions(database_module.DAYS_AHEAD + 1)
            assert done.is_set()  # it waited its turn
            assert _day_partitions(database) >= database_module.DAYS_AHEAD + 2
        finally:
            holder.join()
            other.close()
