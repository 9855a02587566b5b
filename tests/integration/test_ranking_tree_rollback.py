"""Going back to a release whose ranking tree has B = 16: adapters/sql/rollback/ranking_tree_of_16.sql
rebuilds the odd levels the tree of 256 leaves stale, on both engines, and that release's tree then
ranks every board as brute force does, whoever wrote it (ranking.tree.DEFAULT_TREE)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.ranking import SqliteRankingStore
from adapters.mysql.database import MysqlDatabase
from adapters.mysql.ranking import MysqlRankingStore
from adapters.sql.migrations import statements
from ports import BoardSettings, BoardUpdate, Checkpoint, RankingStore
from ports.limits import INT64_MAX, INT64_MIN
from ranking.queries import rank_of, score_at
from ranking.tree import DEFAULT_TREE, Tree
from tests.services import mysql_database, namespace

ROLLBACK = resources.files("adapters.sql") / "rollback" / "ranking_tree_of_16.sql"
OLD = Tree(4)
EDGES = [INT64_MIN, INT64_MIN + 1, -(1 << 40), -17, -16, -1, 0, 1, 15, 16, 255, 256, 1 << 40, INT64_MAX]


@pytest.fixture(params=["embedded", "services"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SqliteIndexDatabase | MysqlDatabase,
                                                                             RankingStore]]:
    if request.param == "embedded":
        database = SqliteIndexDatabase(tmp_path / "index.sqlite")
        yield database, SqliteRankingStore(database)
        return
    with mysql_database(namespace()) as mysql:
        yield mysql, MysqlRankingStore(mysql)


def test_the_rollback_script_gives_a_tree_of_sixteen_its_odd_levels_back(
        stores: tuple[SqliteIndexDatabase | MysqlDatabase, RankingStore]) -> None:
    database, store = stores
    rng = random.Random(7)
    players: dict[str, dict[str, int]] = {"b": {}, "c@1764547200000": {}}
    step = 0

    def move(board: str, tree: Tree, changes: dict[str, int]) -> None:
        nonlocal step
        old = players[board]
        deltas = tree.deltas([(old.get(p), s) for p, s in changes.items()])
        store.apply(Checkpoint("c", "r-0", step - 1, step), [BoardUpdate(BoardSettings(board), changes, deltas)])
        old.update(changes)
        step += 1

    for board in players:  # written by a worker of B = 16, then moved by one of this release
        move(board, OLD, {f"p{i}": rng.choice([*EDGES, rng.randrange(-(1 << 20), 1 << 20)]) for i in range(60)})
        for _ in range(3):
            move(board, DEFAULT_TREE, {f"p{rng.randrange(80)}": rng.choice([*EDGES, rng.randrange(1 << 30)])
                                       for _ in range(25)})
    with database.transaction() as t:
        for statement in statements(ROLLBACK.read_text()):
            t.cursor.execute(statement)
    for board, scores in players.items():
        standing = Counter(scores.values())
        for order in ("desc", "asc"):
            ranked = sorted(standing.elements(), reverse=order == "desc")
            for probe in [*EDGES, *standing]:
                better = sum(n for s, n in standing.items() if (s > probe if order == "desc" else s < probe))
                assert rank_of(OLD, store, board, order, probe) == 1 + better
            assert [score_at(OLD, store, board, order, p) for p in range(1, len(ranked) + 2)] == [*ranked, None]
