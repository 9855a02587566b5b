"""A shared migration (adapters/sql/shared/) on MariaDB: applied after MySQL's own, once, and run
again when it was cut off midway (MySQL commits each DDL statement by itself), where what it added
already is taken as added."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.mysql import database as database_module
from adapters.sql import migrations
from tests.services import mysql_database, namespace
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
