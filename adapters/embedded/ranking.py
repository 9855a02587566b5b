"""Leaderboards on SQLite: scores, tree node counts and board settings beside the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.sqlite import sqlite_meaning
from adapters.errors import port_errors
from adapters.sql import ranking as sql
from ports import Applied, BoardSettings, BoardUpdate, Checkpoint, Entry, NodeRange, Order


@port_errors("ranking", sqlite_meaning)
class SqliteRankingStore:
    def __init__(self, database: SqliteIndexDatabase) -> None:
        self._database = database
        self._db = database.db

    def snapshot(self) -> AbstractContextManager[None]:
        return self._db.snapshot()

    def get_board(self, board: str) -> BoardSettings | None:
        row = self._db.connection().execute(sql.GET_BOARD, (board,)).fetchone()
        return None if row is None else BoardSettings(*row)

    def boards(self, after: str, limit: int) -> list[BoardSettings]:
        return [BoardSettings(*row) for row in self._db.connection().execute(sql.BOARDS, (after, limit))]

    def put_board(self, settings: BoardSettings) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO boards VALUES (?, ?, ?) ON CONFLICT (board) "
                "DO UPDATE SET sort_order = excluded.sort_order, operator = excluded.operator",
                (settings.board, settings.order, settings.operator),
            )

    def scores(self, board: str, player_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(player_ids), 500):
            query, params = sql.scores(board, player_ids[start : start + 500])
            found.update((e.player_id, e.score) for e in sql.entries(self._db.connection().execute(query, params)))
        return found

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._database.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._database.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._database.covered(consumer, topic_partition, offsets)

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

    def sum_counts(self, board: str, ranges: Sequence[NodeRange]) -> int:
        if not ranges:
            return 0
        query, params = sql.sum_counts(board, ranges)
        return int(self._db.connection().execute(query, params).fetchone()[0])

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        rows = self._db.connection().execute(sql.NODE_COUNTS, (board, nodes.level, nodes.first, nodes.last))
        return {int(prefix): int(count) for prefix, count in rows}

    def tied(self, board: str, score: int, after_player: str, limit: int, skip: int = 0) -> list[Entry]:
        return sql.entries(self._db.connection().execute(sql.TIED, (board, score, after_player, limit, skip)))

    def tied_before(self, board: str, score: int, before_player: str, limit: int) -> list[Entry]:
        return sql.entries(self._db.connection().execute(sql.TIED_BEFORE, (board, score, before_player, limit)))

    def beyond(self, board: str, order: Order, score: int, worse: bool, limit: int) -> list[Entry]:
        query, params = sql.beyond(board, order, score, worse, limit)
        return sql.entries(self._db.connection().execute(query, params))

    def close(self) -> None:
        self._db.close()
