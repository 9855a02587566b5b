"""The statements both SQL engines share (adapters.sql.statements): the tables they are written
against are the migrated ones, each compiles for both engines, and an IN list padded to a shared
shape finds exactly what the list names."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.ranking import SqliteRankingStore
from adapters.sql import queries, ranking
from adapters.sql.schema import BODY_HASH, reports, session_counts
from adapters.sql.statements import Statement, insert, listed, marks, padded
from ports import NodeRange, Position
from ports.limits import INT64_MIN
from ranking.ties import TIE_TREE
from ranking.tree import DEFAULT_TREE
from tests.services import mysql_database, namespace

SHARED = [t for t in reports.metadata.sorted_tables if t.name != "report_keys"]  # report_keys: MySQL's own


def test_the_tables_statements_are_written_against_are_the_migrated_ones_on_sqlite(tmp_path: Path) -> None:
    conn = SqliteIndexDatabase(tmp_path / "index.sqlite").db.connection()
    for table in SHARED:
        migrated = {row[1] for row in conn.execute(f"PRAGMA table_info({table.name})")}
        assert set(table.c.keys()) == migrated, table.name


@pytest.mark.services
def test_the_tables_statements_are_written_against_are_the_migrated_ones_on_mysql() -> None:
    with mysql_database(namespace()) as database:
        for table in reports.metadata.sorted_tables:
            migrated = {row[0] for row in database.run(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
                "AND table_name = %s", (table.name,))}
            # MySQL keeps a report's body hash with its key (report_keys), SQLite with the report
            assert set(table.c.keys()) - ({BODY_HASH} if table is reports else set()) == migrated, table.name


def test_every_shared_statement_compiles_for_both_engines() -> None:
    statements = [v for module in (queries, ranking) for v in vars(module).values() if isinstance(v, Statement)]
    assert len(statements) >= 20
    for statement in statements:
        texts = {engine: statement.on(engine).text for engine in ("sqlite", "mysql")}
        assert "%s" not in texts["sqlite"] and "?" not in texts["mysql"]


def test_an_insert_takes_its_values_in_the_order_of_its_columns() -> None:
    # SQLAlchemy writes an insert's values in the table's column order, whatever order they came in
    with pytest.raises(AssertionError, match="takes"):
        Statement(sa.insert(session_counts).values(minute=sa.bindparam("minute"), sku=sa.bindparam("sku")),
                  in_order=("minute", "sku")).on("sqlite")
    upsert = insert(session_counts, ("sku", "minute", "kind", "count"), keys=("sku", "minute", "kind"), add=("count",))
    assert upsert.on("mysql").names == ("sku", "minute", "kind", "count")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2_000), min_size=1, max_size=700))
def test_a_padded_in_list_finds_exactly_what_it_names(wanted: list[int]) -> None:
    assert len(listed("n", wanted)) == padded(len(wanted)) >= len(wanted)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (n INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(0, 2_000, 3)])
    t = sa.table("t", sa.column("n"))
    compiled = Statement(sa.select(t.c.n).where(t.c.n.in_(marks("n", padded(len(wanted)))))).on("sqlite")
    found = {row[0] for row in conn.execute(compiled.text, compiled.params(listed("n", wanted)))}
    assert found == {n for n in wanted if n % 3 == 0}


# SQLite before 3.32 takes 999 bound values a statement (3.40 here takes 32,766, so only a count tells)
SQLITE_BOUND_VALUES = 999


def test_the_most_a_sqlite_statement_of_ranks_or_tie_counts_binds_is_within_its_limit() -> None:
    """The most ranges a rank or a subscore's tie count has, in a statement of as many as the
    store reads at once: each range names its board (and score) again, for SQLite to seek it."""
    items = SqliteRankingStore.ONE_ROW_SELECTS
    assert padded(items) == items  # a part of fewer is padded up to it, not past it
    rank = [NodeRange(level, 0, 1) for level in DEFAULT_TREE.levels]
    assert len(DEFAULT_TREE.better_ranges(INT64_MIN, "desc")) == len(rank)  # a rank can have them all
    ties = [NodeRange(level, 0, 1) for level in range(TIE_TREE.top + 2)]  # a subscore's rank adds its own
    position = Position(1, 2, "p")
    for statement, values in (ranking.sum_counts("b", [rank] * items), ranking.sum_counts("b", [ties] * items,
                                                                                          [5] * items),
                              ranking.tied_between("b", [("", position)] * items)):
        assert len(statement.on("sqlite").params(values)) <= SQLITE_BOUND_VALUES
