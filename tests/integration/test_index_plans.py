"""A page of one sku's reports reads that sku's rows only, however many reports other skus have:
the bench's one-report query on MariaDB once took 29 ms because the primary key was walked
through 27,000 other reports, and SQLite sorted every report of the sku for a LIMIT 1. The same
holds newest first (the index read backwards). Listing the skus reads one index entry a sku. A page
of a sku's alert history seeks its alerts and each one's deliveries. The skus of the reports a
batch of walks names are seeks by key. A rank reads each of its node ranges by a seek."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
from adapters.embedded.ranking import SqliteRankingStore
from adapters.mysql.database import MysqlDatabase
from adapters.mysql.index import MysqlCrashIndex, MysqlSessionCounters
from adapters.mysql.ranking import MysqlRankingStore
from adapters.sql import issues as issues_sql
from adapters.sql import ranking as ranking_sql
from adapters.sql.issues import GROUP_BUILDS, GROUP_PLAYERS, HISTORY_BEFORE, HISTORY_FIRST, group_counts_queries
from adapters.sql.queries import crash_counts_query, crash_groups_query, find_query, origins
from adapters.sql.statements import Engine, Query, Statement
from ports import BoardSettings, BoardUpdate, Checkpoint, IndexEntry, Order, Position, ReportFilter, SessionBucket
from ranking.tree import DEFAULT_TREE
from tests.services import mysql_database, namespace

OTHER_REPORTS = 3_000
# with these counts MariaDB chose to walk the primary key (3,001 rows for one) before the fix
OUR_REPORTS = 30


def _entries(sku: str, count: int, start: int) -> list[IndexEntry]:
    return [IndexEntry(report_key=f"{n:032x}", event_id=f"e{n}", sku=sku, received_at=1_000_000, size_bytes=1)
            for n in range(start, start + count)]


def _load(index: SqliteCrashIndex | MysqlCrashIndex) -> ReportFilter:
    """Many reports of another sku first (lower ids), then ours."""
    for start in range(0, OTHER_REPORTS, 1_000):
        index.insert_many(_entries("busy:pc", 1_000, start))
    index.insert_many(_entries("quiet:pc", OUR_REPORTS, OTHER_REPORTS))
    return ReportFilter(sku="quiet:pc", limit=1)


def _page(query: ReportFilter, engine: Engine) -> tuple[str, tuple[Any, ...]]:
    return _compiled(find_query(query), engine)


def _sqlite_plan(database: SqliteIndexDatabase, sql: str, params: Sequence[Any]) -> list[str]:
    """The steps of SQLite's plan (EXPLAIN QUERY PLAN's detail column)."""
    return [row[3] for row in database.db.connection().execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def _mysql_plan(database: MysqlDatabase, query: Query, tables: str) -> list[dict[str, Any]]:
    """EXPLAIN's rows by column name (MySQL 8 has a column MariaDB has not), after ANALYZE TABLE
    of `tables` (the statistics a table in use has)."""
    statement, values = query
    compiled = statement.on("mysql")
    with database.connection().cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {tables}")
        cursor.fetchall()
        cursor.execute(f"EXPLAIN {compiled.text}", compiled.params(values))
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.mark.parametrize("newest_first", [False, True])
def test_sqlite_pages_through_the_sku_index_without_sorting(tmp_path: Path, newest_first: bool) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    query = dataclasses.replace(_load(SqliteCrashIndex(database)), newest_first=newest_first)
    sql, params = _page(query, "sqlite")
    plan = " | ".join(_sqlite_plan(database, sql, params))
    assert "USING INDEX reports_sku_id" in plan
    assert "TEMP B-TREE" not in plan


def _analyzed(database: MysqlDatabase, sql: str, params: Sequence[Any]) -> dict[str, Any]:
    """The reports table's access in MariaDB's ANALYZE FORMAT=JSON of `sql`, after ANALYZE TABLE
    (the statistics a table in use has)."""
    with database.connection().cursor() as cursor:
        cursor.execute("ANALYZE TABLE reports")
        cursor.fetchall()
        cursor.execute(f"ANALYZE FORMAT=JSON {sql}", params)
        (analysis,) = cursor.fetchone()
    return _table(json.loads(analysis))


def _compiled(query: Query, engine: Engine) -> tuple[str, tuple[Any, ...]]:
    statement, values = query
    compiled = statement.on(engine)
    return compiled.text, compiled.params(values)


def _table(node: Any) -> dict[str, Any]:
    """The table access in an ANALYZE FORMAT=JSON plan, wherever a filesort puts it."""
    if isinstance(node, dict):
        if "table_name" in node:
            return node
        children: list[Any] = list(node.values())
    else:
        children = node if isinstance(node, list) else []
    for child in children:
        found = _table(child)
        if found:
            return found
    return {}


@pytest.mark.services
@pytest.mark.parametrize("newest_first", [False, True])
def test_mysql_reads_only_the_skus_rows(newest_first: bool) -> None:
    with mysql_database(namespace()) as database:
        query = dataclasses.replace(_load(MysqlCrashIndex(database)), newest_first=newest_first)
        table = _analyzed(database, *_page(query, "mysql"))
        assert table["key"] == "reports_sku_id"
        assert table["r_rows"] == 1  # the index is read in order: a LIMIT 1 stops at the first row


@pytest.mark.services
def test_mysql_finds_reports_origins_by_key_seeks() -> None:
    with mysql_database(namespace()) as database:
        _load(MysqlCrashIndex(database))
        query = origins(MysqlCrashIndex.KEYS, [f"{n:032x}" for n in (5, OTHER_REPORTS + 5)])
        # table → the index it reads: the keys' unique index, then each partition's primary key
        plan = {row["table"]: row["key"] for row in _mysql_plan(database, query, "reports, report_keys")}
        assert plan == {"report_keys": "report_keys_key", "reports": "PRIMARY"}


def test_sqlite_steps_from_sku_to_sku_by_index_seeks(tmp_path: Path) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    _load(SqliteCrashIndex(database))
    for query in (SqliteCrashIndex.SKUS, SqliteSessionCounters.SKUS):
        plan = _sqlite_plan(database, query.on("sqlite").text, ("", 10))
        reads = [step for step in plan if step.startswith(("SCAN", "SEARCH")) and "found" not in step]
        # every read of the table is a seek on the sku (sku>? to the next, sku=? for its latest)
        assert reads and all(step.startswith("SEARCH") and "(sku" in step for step in reads), plan


@pytest.mark.services
def test_mysql_lists_skus_with_a_loose_index_scan() -> None:
    with mysql_database(namespace()) as database:
        _load(MysqlCrashIndex(database))
        # many minutes of sessions of two skus
        MysqlSessionCounters(database).apply(Checkpoint("c", "s-0", -1, 0), {
            SessionBucket(sku, minute * 60_000, "client"): 1 for sku in ("busy:pc", "quiet:pc") for minute in range(500)
        })
        with database.connection().cursor() as cursor:
            for query in (MysqlCrashIndex.SKUS, MysqlSessionCounters.SKUS):
                cursor.execute("ANALYZE TABLE reports, session_counts")
                cursor.fetchall()
                cursor.execute(f"ANALYZE FORMAT=JSON {query.on('mysql').text}", ("", 10))
                (analysis,) = cursor.fetchone()
                table = _table(json.loads(analysis))
                # one index entry a sku ("Using index for group-by"), not every report or minute of it
                assert table.get("using_index_for_group_by") is True and table["r_rows"] <= 3, analysis


def test_sqlite_reads_a_page_of_alert_history_by_seeks(tmp_path: Path) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    values = {"sku": "g", "from_ms": 0, "to_ms": 10, "limit": 20, "created_at": 5, "alert_key": "k"}
    for statement in (HISTORY_FIRST, HISTORY_BEFORE):
        compiled = statement.on("sqlite")
        plan = _sqlite_plan(database, compiled.text, compiled.params(values))
        # the page's alerts in the index's order (a sort, if any, is of the page's rows only)
        assert "SEARCH webhook_alerts USING INDEX webhook_alerts_sku (sku=? AND created_at>? AND created_at<?)" in plan
        assert any(step.startswith("SEARCH webhook_deliveries USING INDEX webhook_deliveries_alert") for step in plan)
        assert not any(step.startswith("SCAN webhook") for step in plan), plan


@pytest.mark.parametrize("tie", [False, True], ids=["tree", "tie-tree"])
def test_sqlite_seeks_each_node_range_of_a_rank(tmp_path: Path, tie: bool) -> None:
    """The ranges' OR once sat beside the board's term, and SQLite sought the board alone: a rank
    on the embedded profile read every node of the board (138 ms at 100,000 players)."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    ranges = DEFAULT_TREE.better_ranges(123_456_789, "desc")
    statement, values = ranking_sql.sum_counts("b", [ranges, ranges[:3]], [5, 6] if tie else None)
    compiled = statement.on("sqlite")
    plan = _sqlite_plan(database, compiled.text, compiled.params(values))
    reads = [step for step in plan if step.startswith(("SCAN", "SEARCH"))]
    key = f"(board=? AND {'score=? AND ' if tie else ''}level=? AND prefix>? AND prefix<?)"
    assert reads and all(step.startswith("SEARCH") and step.endswith(key) for step in reads), plan


@pytest.mark.services
def test_mysql_reads_a_rank_by_ranges_of_the_primary_key() -> None:
    with mysql_database(namespace()) as database:
        store = MysqlRankingStore(database)
        scores = {f"p{n}": n * 7_919 for n in range(2_000)}
        store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(BoardSettings("b"), scores, DEFAULT_TREE.deltas(
            (None, score) for score in scores.values()))])
        ranges = DEFAULT_TREE.better_ranges(5_000_000, "desc")
        rows = _mysql_plan(database, ranking_sql.sum_counts("b", [ranges, ranges[:3]]), "rank_nodes")
        # (table, access, index) of each select; the union's result has no table of its own
        plan = [(row["table"], row["type"], row["key"]) for row in rows if row["table"] == "rank_nodes"]
        assert plan == [("rank_nodes", "range", "PRIMARY")] * 2


def test_sqlite_reads_tie_counts_by_a_seek_each(tmp_path: Path) -> None:
    """The worker's read of the joined nodes of tie trees' floors (ranking.ties): a seek of the
    whole primary key each, not the board's every tie node (SQLite's plan when the board stands
    outside the OR)."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    statement, values = ranking_sql.tie_counts("b", [(3, 2, 40), (3, 2, 41), (5, 1, 7)])
    compiled = statement.on("sqlite")
    plan = _sqlite_plan(database, compiled.text, compiled.params(values))
    seek = "SEARCH rank_tie_nodes USING PRIMARY KEY (board=? AND score=? AND level=? AND prefix=?)"
    assert [step for step in plan if step.startswith(("SCAN", "SEARCH"))] == [seek] * 4, plan


@pytest.mark.services
def test_mysql_reads_tie_counts_by_a_range_of_the_primary_key() -> None:
    with mysql_database(namespace()) as database:
        store = MysqlRankingStore(database)
        nodes = {(score, 2, prefix): 1 for score in range(20) for prefix in range(100)}
        store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(BoardSettings("b", ties="earliest"), {}, {},
                                                                tie_deltas=nodes)])
        rows = _mysql_plan(database, ranking_sql.tie_counts("b", [(3, 2, 40), (3, 2, 41), (5, 2, 7)]),
                           "rank_tie_nodes")
        assert [(row["table"], row["type"], row["key"]) for row in rows] == [("rank_tie_nodes", "range", "PRIMARY")]
        assert all(int(row["rows"]) <= 4 for row in rows), rows


def test_sqlite_finds_the_players_at_scores_by_seeks(tmp_path: Path) -> None:
    """SQLite read every record of the board for them (its primary key's board prefix): 6.5 ms on
    100,000 players, for each batch of a worker on a board whose ties do not share a rank."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    statement, values = ranking_sql.at_scores("b", [3, 5, 8])
    compiled = statement.on("sqlite")
    plan = _sqlite_plan(database, compiled.text, compiled.params(values))
    assert plan == ["SEARCH rank_scores USING INDEX rank_scores_asc (board=? AND hidden=? AND score=?)"]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_sqlite_counts_better_tiebreaks_by_a_seek(tmp_path: Path, order: Order) -> None:
    """A rank in a tie below its tree's size counts at most that many entries of the index."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    statement, values = ranking_sql.better_tied("b", order, [(3, 4, 0), (5, 6, 9)], 64)
    compiled = statement.on("sqlite")
    plan = _sqlite_plan(database, compiled.text, compiled.params(values))
    reads = [step for step in plan if step.startswith(("SCAN rank", "SEARCH"))]
    # the index alone: whether a record is shown is one of its columns
    seek = ("SEARCH rank_scores USING COVERING INDEX rank_scores_asc "
            "(board=? AND hidden=? AND score=? AND tiebreak>? AND tiebreak<?)")
    assert reads == [seek] * 2, plan


@pytest.mark.services
def test_mysql_counts_better_tiebreaks_by_a_range_of_the_index() -> None:
    with mysql_database(namespace()) as database:
        store = MysqlRankingStore(database)
        scores = {f"p{n}": n % 50 for n in range(2_000)}
        deltas = DEFAULT_TREE.deltas((None, score) for score in scores.values())
        store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(BoardSettings("b", ties="subscore"), scores, deltas,
                                                                tiebreaks={p: n for n, p in enumerate(scores)})])
        rows = _mysql_plan(database, ranking_sql.better_tied("b", "desc", [(3, 100, 355), (5, 600, 767)], 64),
                           "rank_scores")
        plan = [(row["table"], row["type"], row["key"]) for row in rows if row["table"] == "rank_scores"]
        assert plan == [("rank_scores", "range", "rank_scores_asc")] * 2, rows


def _ranking_reads(order: Order) -> list[tuple[str, Query]]:
    """Each read of a board's records by score: a page's steps (and their counts), the ties before a
    player, the better tiebreaks of a score, the players at scores."""
    position = Position(5, 0, "x")
    reads = [(f"{step} worse={worse} count={count}", ranking_sql.following(
        step, "b", order, position, worse=worse, limit=10, count=count))
        for step in ranking_sql.FOLLOWING_STEPS for worse in (True, False) for count in (True, False)]
    return [*reads, ("tied_between", ranking_sql.tied_between("b", [("", position), ("a", Position(6, 1, "y"))])),
            ("better_tied", ranking_sql.better_tied("b", order, [(3, 4, 0), (5, 6, 9)], 64)),
            ("at_scores", ranking_sql.at_scores("b", [3, 5, 8]))]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_sqlite_reads_of_a_board_by_score_seek_past_the_hidden_records(tmp_path: Path, order: Order) -> None:
    """Found in review: the index of a board's records by score did not hold whether a record is
    hidden, so every read stepped through the banned players' records it passed: a board with
    40,000 banned bots at its top read a page of 10 in 30 ms (3 ms without), a friends list of 60
    in a tie of them in 1.8 s."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    for name, (statement, values) in _ranking_reads(order):
        compiled = statement.on("sqlite")
        plan = _sqlite_plan(database, compiled.text, compiled.params(values))
        reads = [step for step in plan if step.startswith(("SCAN rank", "SEARCH", "USE TEMP"))]
        seek = r"SEARCH rank_scores USING (COVERING )?INDEX rank_scores_(asc|desc) \(board=\? AND hidden=\? AND score.*"
        assert reads and all(re.fullmatch(seek, step) for step in reads), (name, plan)


@pytest.mark.services
def test_mysql_reads_of_a_board_by_score_seek_past_the_hidden_records() -> None:
    with mysql_database(namespace()) as database:
        store = MysqlRankingStore(database)
        banned = {f"bot{n}": 1_000 for n in range(2_000)}
        shown = {f"p{n}": n for n in range(5)}
        scores = banned | shown
        for player in banned:
            store.ban(player, 1)
        store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(
            BoardSettings("b"), scores, DEFAULT_TREE.deltas((None, s) for s in shown.values()),
            hidden=frozenset(banned))])
        for name, query in _ranking_reads("desc"):
            rows = [row for row in _mysql_plan(database, query, "rank_scores") if row["table"] == "rank_scores"]
            assert rows and all(int(row["rows"] or 0) < 100 for row in rows), (name, rows)


def test_a_friends_list_in_one_tie_reads_the_tie_once(tmp_path: Path) -> None:
    """Found in review: players of one score and tiebreak (a subscore board whose clients send
    none) are ranked by playerId, each counting those before it in the tie: 1,000 friends at the
    end of a tie of 40,000 read it 1,000 times, 19 s. Measured in SQLite's virtual machine steps
    (its progress handler), against the one friend last in the tie."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    store = SqliteRankingStore(database)
    players = {f"u{n:05d}": 7 for n in range(4_000)}
    store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(BoardSettings("b", ties="subscore"), players,
                                                            DEFAULT_TREE.deltas((None, 7) for _ in players))])

    def steps(positions: list[Position]) -> tuple[list[int], int]:
        taken = [0]
        connection = database.db.connection()
        connection.set_progress_handler(lambda: taken.__setitem__(0, taken[0] + 1), 100)
        try:
            return store.tied_before("b", positions), taken[0]
        finally:
            connection.set_progress_handler(None, 100)

    friends = [Position(7, 0, f"u{n:05d}") for n in (3_999, *range(3_900, 3_999), 3_950, 5)]  # and again
    counted, friends_steps = steps(friends)
    assert counted == [3_999, *range(3_900, 3_999), 3_950, 5]
    assert steps([Position(7, 1, "u03999"), Position(8, 0, "u03999")])[0] == [0, 0]  # other ties
    last, last_steps = steps(friends[:1])
    assert last == [3_999] and friends_steps <= 2 * last_steps, (friends_steps, last_steps)


def test_sqlite_finds_the_ignores_a_batch_counts_for_by_its_groups_alone(tmp_path: Path) -> None:
    """Found in review: the crash consumer's look for issues ignored until a count read every issue
    of the batch's skus (14 ms a batch in a sku of 100,000 groups), where it needs the batch's."""
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    statement, values = issues_sql.counting("g", ["aa", "bb", "cc"])
    compiled = statement.on("sqlite")
    plan = _sqlite_plan(database, compiled.text, compiled.params(values))
    assert plan == ["SEARCH crash_issues USING INDEX sqlite_autoindex_crash_issues_1 (sku=? AND signature=?)"], plan


# found from outside (a million reports of one sku): a page of a rare build's or signature's
# reports walked every report of the sku (1.1 s), and a build's crash counts looked up every
# report of the sku in the window (0.9 s; release health counts three times)
RARE = {"build_version": "1.2.0", "signature": "00000000000000ff"}


def _load_filtered(index: SqliteCrashIndex | MysqlCrashIndex) -> None:
    """One sku: many reports of a common build and signature first (lower ids), then few of a rare one."""
    common = {"build_version": "1.4.3", "signature": "000000000000000a"}
    for start in range(0, OTHER_REPORTS, 1_000):
        index.insert_many([dataclasses.replace(e, **common) for e in _entries("busy:pc", 1_000, start)])
    index.insert_many([dataclasses.replace(e, **RARE) for e in _entries("busy:pc", OUR_REPORTS, OTHER_REPORTS)])


FILTERED = [("build_version", "reports_sku_build_id"), ("signature", "reports_sku_signature_id")]


@pytest.mark.parametrize(("field", "index"), FILTERED)
@pytest.mark.parametrize("newest_first", [False, True])
def test_sqlite_pages_a_builds_or_signatures_reports_through_its_index(
        tmp_path: Path, field: str, index: str, newest_first: bool) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    _load_filtered(SqliteCrashIndex(database))
    query = ReportFilter(sku="busy:pc", limit=1, equals={field: RARE[field]}, newest_first=newest_first)
    plan = " | ".join(_sqlite_plan(database, *_page(query, "sqlite")))
    assert f"USING INDEX {index}" in plan and "TEMP B-TREE" not in plan, plan


@pytest.mark.services
@pytest.mark.parametrize(("field", "index"), FILTERED)
@pytest.mark.parametrize("newest_first", [False, True])
def test_mysql_pages_a_builds_or_signatures_reports_through_its_index(
        field: str, index: str, newest_first: bool) -> None:
    with mysql_database(namespace()) as database:
        _load_filtered(MysqlCrashIndex(database))
        query = ReportFilter(sku="busy:pc", limit=1, equals={field: RARE[field]}, newest_first=newest_first)
        table = _analyzed(database, *_page(query, "mysql"))
        assert table["key"] == index and table["r_rows"] == 1, table


# a build's entries of a window, read from the index alone: its crash counts, and the velocity
# alert job's group counts of the builds with sessions (found from outside: it walked every
# report of the sku, 0.9 s a run)
BUILD_WINDOW = "USING COVERING INDEX reports_sku_build_received (sku=? AND build_version=? AND received_at>? AND " \
               "received_at<?)"
BUILD_WINDOW_READS = {
    "crash counts": lambda: crash_counts_query("busy:pc", 0, 2_000_000, 60_000, {"build_version": "1.2.0"}),
    "group counts": lambda: group_counts_queries("busy:pc", ["1.2.0", "9.9"], 0, 2_000_000, 1)[0],
}


@pytest.mark.parametrize("read", BUILD_WINDOW_READS.values(), ids=BUILD_WINDOW_READS.keys())
def test_sqlite_reads_a_builds_window_from_its_index(tmp_path: Path, read: Callable[[], Query]) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    _load_filtered(SqliteCrashIndex(database))
    plan = " | ".join(_sqlite_plan(database, *_compiled(read(), "sqlite")))
    assert BUILD_WINDOW in plan, plan


@pytest.mark.services
@pytest.mark.parametrize("read", BUILD_WINDOW_READS.values(), ids=BUILD_WINDOW_READS.keys())
def test_mysql_reads_a_builds_window_from_its_index(read: Callable[[], Query]) -> None:
    with mysql_database(namespace()) as database:
        _load_filtered(MysqlCrashIndex(database))
        table = _analyzed(database, *_compiled(read(), "mysql"))
        # the rare build's rows alone, from the index (no row looked up)
        assert table["key"] == "reports_sku_build_received" and table["using_index"] is True, table
        assert table["r_rows"] == OUR_REPORTS, table


@pytest.mark.services
@pytest.mark.parametrize("build", [None, "1.4.3", "1.2.0"])
def test_mysql_groups_a_window_from_an_index_alone(build: str | None) -> None:
    """Found measuring the indexes above: MariaDB grouped a day of a million reports through the new
    (sku, signature, report_id), looking up each row's receipt (2.2 s against 0.45); and a common
    build's day through (sku, build_version, received_at), looking up each row's signature (2.0 s)."""
    with mysql_database(namespace()) as database:
        _load_filtered(MysqlCrashIndex(database))
        equals = None if build is None else {"build_version": build}
        table = _analyzed(database, *_compiled(crash_groups_query("busy:pc", 0, 2_000_000, 20, equals), "mysql"))
        assert table.get("using_index") is True, table


# found from outside (a million reports of one sku, a quarter of them in one group): a group's
# detail looked up each of its reports for its builds' players (1.2 s)
DETAIL = [GROUP_BUILDS, GROUP_PLAYERS]
COMMON = {"sku": "busy:pc", "signature": "000000000000000a"}


@pytest.mark.parametrize("statement", DETAIL, ids=["builds", "players"])
def test_sqlite_reads_a_groups_detail_from_an_index_alone(tmp_path: Path, statement: Statement) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    _load_filtered(SqliteCrashIndex(database))
    plan = " | ".join(_sqlite_plan(database, *_compiled((statement, COMMON), "sqlite")))
    assert "USING COVERING INDEX reports_sku_signature_players (sku=? AND signature=?)" in plan, plan


@pytest.mark.services
@pytest.mark.parametrize("statement", DETAIL, ids=["builds", "players"])
def test_mysql_reads_a_groups_detail_from_an_index_alone(statement: Statement) -> None:
    with mysql_database(namespace()) as database:
        _load_filtered(MysqlCrashIndex(database))
        table = _analyzed(database, *_compiled((statement, COMMON), "mysql"))
        assert table["key"] == "reports_sku_signature_players" and table["using_index"] is True, table


# found from outside (a million reports of one sku): a platform's groups of a day looked up every
# report of the sku (2.4 s), and an hour's groups read every report's entry (0.4 s)
WINDOW = (4_000_000, 6_000_000)
WINDOW_FILTERS = [None, {"platform": "ps5"}, {"crash_type": "oom"}, {"platform": "ps5", "crash_type": "oom"}]
# a signature's: its entries alone, whatever the window
SIGNATURE = {"signature": "00000000000000ff"}


def _load_window(index: SqliteCrashIndex | MysqlCrashIndex) -> None:
    """One sku: many reports before the window, then few in it, of another platform and crash type."""
    before = {"platform": "pc", "crash_type": "native", "signature": "000000000000000a"}
    for start in range(0, OTHER_REPORTS, 1_000):
        index.insert_many([dataclasses.replace(e, **before) for e in _entries("busy:pc", 1_000, start)])
    index.insert_many([dataclasses.replace(e, platform="ps5", crash_type="oom", signature="00000000000000ff",
                                           received_at=5_000_000)
                       for e in _entries("busy:pc", OUR_REPORTS, OTHER_REPORTS)])


SEEK_WINDOW, SEEK_SIGNATURE = "(sku=? AND received_at>? AND received_at<?)", "(sku=? AND signature=?)"


def _window_reads(equals: dict[str, str] | None) -> list[tuple[Query, str, str]]:
    """The window's groups and counts, each with the index it reads and how SQLite seeks it: a
    signature's own entries, else the window's (its counts alone, where nothing filters them, from
    the narrowest index that holds receipts)."""
    if equals == SIGNATURE:
        groups = counts = ("reports_sku_signature", SEEK_SIGNATURE)
    else:
        groups = ("reports_sku_received_groups", SEEK_WINDOW)
        counts = ("reports_sku_received", SEEK_WINDOW) if equals is None else groups
    return [(crash_groups_query("busy:pc", *WINDOW, 20, equals), *groups),
            (crash_counts_query("busy:pc", *WINDOW, 60_000, equals), *counts)]


@pytest.mark.parametrize("equals", [*WINDOW_FILTERS, SIGNATURE])
def test_sqlite_groups_and_counts_a_window_from_its_entries_alone(tmp_path: Path, equals: dict[str, str] | None
                                                                  ) -> None:
    database = SqliteIndexDatabase(tmp_path / "index.sqlite")
    _load_window(SqliteCrashIndex(database))
    for query, index, seek in _window_reads(equals):
        plan = " | ".join(_sqlite_plan(database, *_compiled(query, "sqlite")))
        assert f"USING COVERING INDEX {index} {seek}" in plan, plan


@pytest.mark.services
@pytest.mark.parametrize("equals", [*WINDOW_FILTERS, SIGNATURE])
def test_mysql_groups_and_counts_a_window_from_its_entries_alone(equals: dict[str, str] | None) -> None:
    with mysql_database(namespace()) as database:
        _load_window(MysqlCrashIndex(database))
        for query, index, _ in _window_reads(equals):
            table = _analyzed(database, *_compiled(query, "mysql"))
            # the window's entries alone, each with what the filter asks of it
            assert table["key"] == index and table["using_index"] is True, table
            assert table["r_rows"] == OUR_REPORTS, table
