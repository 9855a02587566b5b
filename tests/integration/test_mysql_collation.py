"""Text compares exactly on MySQL, as on SQLite, in a database a release before this made too: its
tables in utf8mb4_bin, which pads with spaces ("p1" = "p1 "), or made in a database RDS created with
the server's collation, which ignores case and accents as well."""

from __future__ import annotations

import threading

import pytest

from adapters.mysql import database as database_module
from adapters.mysql.database import MysqlDatabase
from tests.services import drop_database, mysql_url, namespace

pytestmark = pytest.mark.services  # on the engines of scripts/services


def collations(database: MysqlDatabase) -> set[str]:
    return {row[0] for row in database.run("SELECT DISTINCT collation_name FROM information_schema.columns "
                                           "WHERE table_schema = DATABASE() AND collation_name IS NOT NULL", ())}


def test_a_database_of_a_release_before_compares_exactly_once_migrated() -> None:
    name = namespace()
    database = MysqlDatabase(mysql_url(name))
    try:
        # as RDS makes it: the server's collation, before any migration ran
        with database._connect(None) as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
        database.migrate()
        [exact] = collations(database)
        # and a table a release before made in utf8mb4_bin, holding a record
        database.run("ALTER TABLE rank_scores CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ())
        database.run("INSERT INTO rank_scores (board, player_id, score) VALUES ('b', 'p1', 1)", ())
        database.connection().commit()
        assert collations(database) == {exact, "utf8mb4_bin"}

        assert database.migrate() == []
        assert collations(database) == {exact}
        database.run("INSERT INTO rank_scores (board, player_id, score) VALUES ('b', 'p1 ', 2), ('b', 'P1', 3)", ())
        database.run("INSERT INTO release_builds (sku, build, first_seen, last_seen) "
                     "VALUES ('g', 'rc', 1, 1), ('g', 'RC', 1, 1), ('g', 'rc ', 1, 1), ('g', 'r\u00e7', 1, 1)", ())
        database.connection().commit()
        assert database.run("SELECT COUNT(*) FROM rank_scores WHERE board = 'b' AND player_id = 'p1'", ()) == [(1,)]
        assert database.run("SELECT COUNT(*) FROM release_builds WHERE sku = 'g'", ()) == [(4,)]
    finally:
        database.close()
        drop_database(name)




def test_a_conversion_longer_than_a_reads_timeout_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: the conversion ran on a connection whose reads time out after 30 s, and a
    large index's rebuild takes longer, so serve (and a deploy) failed at start. Here the rebuild
    waits 2 s for a transaction that has read the table, past a read timeout of 1 s."""
    name = namespace()
    database = MysqlDatabase(mysql_url(name))
    holder = MysqlDatabase(mysql_url(name))
    try:
        database.migrate()
        database.run("ALTER TABLE rank_scores CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ())
        database.close()
        held = holder.connection()
        held.begin()
        with held.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM rank_scores")  # holds the table until it ends
        ending = threading.Timer(2.0, held.commit)
        ending.start()
        monkeypatch.setattr(database_module, "READ_TIMEOUT_S", 1.0)  # a read's timeout, shorter
        database = MysqlDatabase(mysql_url(name))
        assert database.migrate() == []
        ending.join()
        assert len(collations(database)) == 1
    finally:
        database.close()
        holder.close()
        drop_database(name)
