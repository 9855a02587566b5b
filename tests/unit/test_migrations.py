"""Versioned migrations, one tool for MySQL and the embedded files (adapters.sql.migrations): a
data directory of any release is brought up to date when opened, each migration once, and one that
fails leaves the file as it was."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from adapters.embedded import sqlite as embedded
from adapters.embedded.index import SqliteIndexDatabase
from adapters.sql import migrations as sql_migrations
from adapters.sql.migrations import statements

# the crash index as the first releases made it: no body hashes, fingerprints or offset ranges
FIRST_RELEASE = """
CREATE TABLE reports (report_id INTEGER PRIMARY KEY AUTOINCREMENT, report_key TEXT NOT NULL UNIQUE,
    event_id TEXT NOT NULL, sku TEXT NOT NULL, submit_time INTEGER NOT NULL, received_at INTEGER NOT NULL,
    crash_type TEXT, error_code TEXT, platform TEXT, build_version TEXT, signature TEXT,
    size_bytes INTEGER NOT NULL, attachments TEXT NOT NULL);
CREATE TABLE applied_events (consumer TEXT NOT NULL, event_id TEXT NOT NULL, applied_at INTEGER NOT NULL,
    PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;
CREATE TABLE applied_offsets (consumer TEXT NOT NULL, topic_partition TEXT NOT NULL, applied INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic_partition)) WITHOUT ROWID;
INSERT INTO reports VALUES (7, 'k', 'e', 'g', 1, 1, NULL, NULL, NULL, NULL, NULL, 10, '[]');
"""


@pytest.fixture(autouse=True)
def no_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What these tests apply is their own: a release's shared migrations are not theirs to count."""
    monkeypatch.setattr(sql_migrations, "SHARED", tmp_path / "no-shared-migrations")


# the embedded index's own migrations, as this release has them
OWN = sorted(f.name for f in (Path(str(embedded.MIGRATIONS)) / "index").glob("*.sql"))


def columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def versions(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def test_a_data_directory_of_the_first_releases_is_brought_up_to_date(tmp_path):
    path = tmp_path / "index.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(FIRST_RELEASE)
    database = SqliteIndexDatabase(path)
    database.db.close()
    assert "body_hash" in columns(path, "reports") and "body_hash" in columns(path, "applied_events")
    assert "fingerprint" in columns(path, "applied_offsets") and "last_offset" in columns(path, "applied_ranges")
    assert versions(path) == OWN
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT report_id, report_key FROM reports").fetchall() == [(7, "k")]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the embedded migrations a test adds to, as a later release would."""
    copy = tmp_path / "migrations"
    shutil.copytree(Path(str(embedded.MIGRATIONS)), copy)
    monkeypatch.setattr(embedded, "MIGRATIONS", copy)
    return copy


def test_a_new_migration_is_applied_once_to_an_existing_file(tmp_path, folder):
    path = tmp_path / "index.sqlite"
    assert SqliteIndexDatabase(path).db.applied == OWN
    (folder / "index" / "9002_player.sql").write_text(
        "-- a column a later release adds; the ';' in this comment ends nothing\n"
        "ALTER TABLE reports ADD COLUMN player_id TEXT;\n"
        "CREATE INDEX reports_player ON reports (sku, player_id);\n")
    assert SqliteIndexDatabase(path).db.applied == ["9002_player.sql"]
    assert SqliteIndexDatabase(path).db.applied == []
    assert "player_id" in columns(path, "reports")
    assert versions(path) == [*OWN, "9002_player.sql"]


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path, folder):
    path = tmp_path / "index.sqlite"
    SqliteIndexDatabase(path).db.close()
    (folder / "index" / "9002_broken.sql").write_text(
        "ALTER TABLE reports ADD COLUMN player_id TEXT;\nALTER TABLE nowhere ADD COLUMN x TEXT;\n")
    with pytest.raises(sqlite3.OperationalError, match="no such table: nowhere"):
        SqliteIndexDatabase(path)
    assert "player_id" not in columns(path, "reports") and versions(path) == OWN


def test_statements_end_at_semicolons_outside_strings_and_comments():
    text = "-- only a comment;\nINSERT INTO t VALUES ('a;b');\n/* c; */ UPDATE t SET x = 'y;';\n"
    assert [s.strip() for s in statements(text)] == [
        "-- only a comment;\nINSERT INTO t VALUES ('a;b');", "/* c; */ UPDATE t SET x = 'y;';"]


# a change to the index schema, in SQL both engines take (adapters/sql/shared/README.md)
SHARED_GPU = "ALTER TABLE reports ADD COLUMN gpu VARCHAR(256);\nCREATE INDEX reports_sku_gpu ON reports (sku, gpu);\n"


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared migrations of a later release."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "0001_gpu.sql").write_text(SHARED_GPU)
    monkeypatch.setattr(sql_migrations, "SHARED", folder)
    return folder


def test_a_shared_migration_changes_the_index_after_its_own(tmp_path, shared):
    path = tmp_path / "index.sqlite"
    assert SqliteIndexDatabase(path).db.applied == [*OWN, "shared/0001_gpu.sql"]
    assert SqliteIndexDatabase(path).db.applied == []
    assert "gpu" in columns(path, "reports")
    # the embedded-only files do not take it
    log = embedded.SqliteFile(tmp_path / "log.sqlite", "log")
    assert all(not name.startswith("shared/") for name in log.applied)
