"""Leaderboards on SQLite: scores, tree node counts and board settings beside the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.sqlite import sqlite_meaning
from adapters.errors import port_errors
from adapters.sql.reads import RankingReads
from ports import BoardSettings, BoardUpdate, Checkpoint


@port_errors("ranking", sqlite_meaning)
class SqliteRankingStore(RankingReads):
    SCORES_AT_ONCE = 500  # SQLite's bound values a statement: 999 before 3.32
    _database: SqliteIndexDatabase

    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def snapshot(self) -> AbstractContextManager[None]:
        return self._db.snapshot()

    def put_board(self, settings: BoardSettings) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO boards VALUES (?, ?, ?) ON CONFLICT (board) "
                "DO UPDATE SET sort_order = excluded.sort_order, operator = excluded.operator",
                (settings.board, settings.order, settings.operator),
            )

    def apply(self, checkpoint: Checkpoint, updates: Sequence[BoardUpdate]) -> None:
        with self._database.checkpoint_transaction(checkpoint) as conn:
            conn.executemany(
                "INSERT INTO boards VALUES (?, ?, ?) ON CONFLICT (board) DO NOTHING",
                [(u.settings.board, u.settings.order, u.settings.operator) for u in updates],
            )
            conn.executemany(
                "INSERT INTO rank_scores VALUES (?, ?, ?) ON CONFLICT (board, player_id) "
                "DO UPDATE SET score = excluded.score",
                [(u.settings.board, player, score) for u in updates for player, score in u.scores.items()],
            )
            conn.executemany(
                "INSERT INTO rank_nodes VALUES (?, ?, ?, ?) ON CONFLICT (board, level, prefix) "
                "DO UPDATE SET count = count + excluded.count",
                [(u.settings.board, level, prefix, delta)
                 for u in updates for (level, prefix), delta in u.deltas.items()],
            )

    def close(self) -> None:
        self._db.close()
