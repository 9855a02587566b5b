"""The ranking worker's reads that MySQL answers packed, as one JSON array (statements.packed): the
same rows as read one by one, whatever the texts and numbers they hold, also where the array comes
back cut short."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.mysql.database import MysqlDatabase
from adapters.mysql.ranking import MysqlRankingStore
from adapters.sql import statements
from ports import Entry
from ports.limits import INT64_MAX, INT64_MIN
from tests.services import mysql_database, namespace

pytestmark = pytest.mark.services  # on the engines of scripts/services

int64 = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, 0, -1]))
# what a column of utf8mb4 holds: quotes, backslashes, controls, and characters past the BMP
texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
entries = st.lists(st.tuples(texts.filter(lambda t: t == t.rstrip(" ")).map(lambda t: "p" + t), int64, int64,
                             st.booleans(), st.none() | texts),
                   max_size=30, unique_by=lambda e: e[0])


@pytest.fixture(scope="module")
def database() -> Iterator[MysqlDatabase]:
    with mysql_database(namespace()) as database:
        yield database


def put(database: MysqlDatabase, board: str, rows: list[tuple[str, int, int, bool, str | None]]) -> None:
    with database.transaction() as t:
        t.cursor.execute("DELETE FROM rank_scores WHERE board = %s", (board,))
        for player, score, tiebreak, hidden, metadata in rows:
            t.cursor.execute("INSERT INTO rank_scores (board, player_id, score, tiebreak, hidden, metadata) "
                             "VALUES (%s, %s, %s, %s, %s, %s)", (board, player, score, tiebreak, hidden, metadata))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=entries, unknown=st.lists(texts.map(lambda t: "q" + t), max_size=5), cut=st.booleans())
def test_records_read_packed_are_those_written(database: MysqlDatabase, caplog: pytest.LogCaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch, rows, unknown, cut) -> None:
    board = "b'\\\"é"
    put(database, board, rows)
    with database.connection().cursor() as cursor:
        # MariaDB's default is 1 MiB; 64 bytes cut all but the smallest arrays short, which are
        # then read row by row
        cursor.execute(f"SET SESSION group_concat_max_len = {64 if cut else 1 << 20}")
    reads: list[str] = []
    run = database.run
    database.run = lambda sql, params: reads.append(sql) or run(sql, params)  # type: ignore[method-assign]
    caplog.clear()  # one fixture's, for every example
    monkeypatch.setattr(statements, "_cut_short", set())  # told once a process: here once an example
    try:
        found = MysqlRankingStore(database).records(board, asked := [player for player, *_ in rows] + unknown)
        first = len(reads)
        assert MysqlRankingStore(database).records(board, asked) == found  # the next read of its kind
    finally:
        del database.run
        with database.connection().cursor() as cursor:
            cursor.execute("SET SESSION group_concat_max_len = DEFAULT")
    # MariaDB's array is no shorter than Python's most compact JSON of the rows
    compact = [[player, score, tiebreak, int(hidden), metadata] for player, score, tiebreak, hidden, metadata in rows]
    longer = len(json.dumps(compact, ensure_ascii=False, separators=(",", ":")).encode()) > 64
    if asked:  # one read, packed, and again row by row where the array was cut
        assert first == (2 if cut and longer else 1) and "json_arrayagg" in reads[0], reads
        assert len(reads) == 2 * first
        # told at the first read again, naming the read, and not at the next
        told = [r.getMessage() for r in caplog.records if "came back cut short" in r.getMessage()]
        assert len(told) == first - 1 and all("FROM rank_scores" in message for message in told), told
    assert found == {player: Entry(player, score, metadata, tiebreak, hidden)
                     for player, score, tiebreak, hidden, metadata in rows}


def test_tie_nodes_read_packed_are_those_written(database: MysqlDatabase) -> None:
    nodes = [(score, level, prefix, count) for score in (INT64_MIN, -5, 0, INT64_MAX) for level in (0, 1)
             for prefix, count in ((INT64_MIN, 1), (-1, 2), (INT64_MAX, INT64_MAX))]
    tops = [(score, level, score - level, level + 1) for score in (INT64_MIN + 10, -5, 0) for level in (9, 10)]
    with database.transaction() as t:
        for board, rows in (("ties", nodes), ("tops", tops)):
            t.cursor.executemany("INSERT INTO rank_tie_nodes (board, score, level, prefix, count) "
                                 "VALUES (%s, %s, %s, %s, %s)", [(board, *row) for row in rows])
    with database.transaction() as t:
        t.cursor.executemany("INSERT INTO rank_nodes (board, level, prefix, count) VALUES (%s, %s, %s, %s)",
                             [("leaves", 0, INT64_MIN, INT64_MAX), ("leaves", 0, 0, 5), ("leaves", 1, 3, 7),
                              ("leaves", 0, 9, 0)])
    store = MysqlRankingStore(database)
    assert store.leaves("leaves", [INT64_MIN, 0, 3, 9]) == {INT64_MIN: INT64_MAX, 0: 5}
    assert store.tie_counts("ties", [(s, level, p) for s, level, p, _ in nodes] + [(1, 1, 1)]) == {
        (s, level, p): c for s, level, p, c in nodes}
    assert store.tie_nodes_at("tops", [INT64_MIN + 10, 0, 7], [9, 10]) == {
        (s, level): (p, c) for s, level, p, c in tops if s != -5}
