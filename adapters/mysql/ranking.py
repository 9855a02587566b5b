"""Leaderboards on MySQL, in the same schema as the crash index."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from adapters.errors import port_errors
from adapters.mysql.database import MysqlDatabase, mysql_meaning
from adapters.sql import ranking as sql
from adapters.sql.queries import pyformat
from ports import Applied, BoardSettings, BoardUpdate, Checkpoint, Entry, NodeRange, Order

# well under max_allowed_packet (16 MiB by default) at about 60 bytes a row
_ROWS_PER_STATEMENT = 20_000


@port_errors("ranking", mysql_meaning)
class MysqlRankingStore:
    def __init__(self, database: MysqlDatabase) -> None:
        self._db = database

    def _rows(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._db.connection().cursor() as cursor:
            cursor.execute(pyformat(query), params)
            return list(cursor.fetchall())

    def snapshot(self) -> AbstractContextManager[None]:
        return self._db.snapshot()

    def get_board(self, board: str) -> BoardSettings | None:
        rows = self._rows(sql.GET_BOARD, (board,))
        return BoardSettings(*rows[0]) if rows else None

    def boards(self, after: str, limit: int) -> list[BoardSettings]:
        return [BoardSettings(*row) for row in self._rows(sql.BOARDS, (after, limit))]

    def put_board(self, settings: BoardSettings) -> None:
        with self._db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO boards (board, sort_order, operator) VALUES (%s, %s, %s) "
                "ON DUPLICATE KEY UPDATE sort_order = VALUES(sort_order), operator = VALUES(operator)",
                (settings.board, settings.order, settings.operator),
            )

    def scores(self, board: str, player_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(player_ids), 1000):
            entries = sql.entries(self._rows(*sql.scores(board, player_ids[start : start + 1000])))
            found.update((e.player_id, e.score) for e in entries)
        return found

    def applied(self, consumer: str, topic_partition: str) -> Applied:
        return self._db.applied(consumer, topic_partition)

    def seen_events(self, consumer: str, event_ids: Sequence[str]) -> dict[str, str | None]:
        return self._db.seen_events(consumer, event_ids)

    def covered(self, consumer: str, topic_partition: str, offsets: Sequence[int]) -> set[int]:
        return self._db.covered(consumer, topic_partition, offsets)

    def apply(self, checkpoint: Checkpoint, updates: Sequence[BoardUpdate]) -> None:
        with self._db.checkpoint_transaction(checkpoint) as cursor:
            # executemany folds each of these into multi-row INSERTs
            cursor.executemany(
                "INSERT IGNORE INTO boards (board, sort_order, operator) VALUES (%s, %s, %s)",
                [(u.settings.board, u.settings.order, u.settings.operator) for u in updates],
            )
            escape = self._db.connection().escape
            for u in updates:
                # the hot path (tens of thousands of rows a batch): rows are rendered here, with
                # the board escaped once and numbers through int(), instead of value by value
                board = escape(u.settings.board)
                scores = [f"({board},{escape(player)},{int(score)})" for player, score in u.scores.items()]
                nodes = [f"({board},{int(level)},{int(prefix)},{int(delta)})"
                         for (level, prefix), delta in u.deltas.items()]
                for start in range(0, len(scores), _ROWS_PER_STATEMENT):
                    cursor.execute(
                        "INSERT INTO rank_scores (board, player_id, score) VALUES "
                        + ",".join(scores[start : start + _ROWS_PER_STATEMENT])
                        + " ON DUPLICATE KEY UPDATE score = VALUES(score)"
                    )
                for start in range(0, len(nodes), _ROWS_PER_STATEMENT):
                    cursor.execute(
                        "INSERT INTO rank_nodes (board, level, prefix, count) VALUES "
                        + ",".join(nodes[start : start + _ROWS_PER_STATEMENT])
                        + " ON DUPLICATE KEY UPDATE count = count + VALUES(count)"
                    )

    def sum_counts(self, board: str, ranges: Sequence[NodeRange]) -> int:
        return int(self._rows(*sql.sum_counts(board, ranges))[0][0]) if ranges else 0

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        rows = self._rows(sql.NODE_COUNTS, (board, nodes.level, nodes.first, nodes.last))
        return {int(prefix): int(count) for prefix, count in rows}

    def tied(self, board: str, score: int, after_player: str, limit: int, skip: int = 0) -> list[Entry]:
        return sql.entries(self._rows(sql.TIED, (board, score, after_player, limit, skip)))

    def tied_before(self, board: str, score: int, before_player: str, limit: int) -> list[Entry]:
        return sql.entries(self._rows(sql.TIED_BEFORE, (board, score, before_player, limit)))

    def beyond(self, board: str, order: Order, score: int, worse: bool, limit: int) -> list[Entry]:
        return sql.entries(self._rows(*sql.beyond(board, order, score, worse, limit)))

    def close(self) -> None:
        self._db.close()
