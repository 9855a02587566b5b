"""The ranking SQL that SQLite and MySQL share (`?` placeholders; see queries.pyformat)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ports import Entry, NodeRange, Order


def sum_counts(board: str, ranges: Sequence[NodeRange]) -> tuple[str, list[Any]]:
    clauses = " OR ".join("(level = ? AND prefix BETWEEN ? AND ?)" for _ in ranges)
    params: list[Any] = [board]
    for r in ranges:
        params += [r.level, r.first, r.last]
    return f"SELECT COALESCE(SUM(count), 0) FROM rank_nodes WHERE board = ? AND ({clauses})", params


NODE_COUNTS = (
    "SELECT prefix, count FROM rank_nodes WHERE board = ? AND level = ? AND prefix BETWEEN ? AND ? AND count > 0"
)
GET_BOARD = "SELECT board, sort_order, operator FROM boards WHERE board = ?"
BOARDS = "SELECT board, sort_order, operator FROM boards WHERE board > ? ORDER BY board LIMIT ?"
TIED = (
    "SELECT player_id, score FROM rank_scores WHERE board = ? AND score = ? AND player_id > ? "
    "ORDER BY player_id LIMIT ? OFFSET ?"
)
TIED_BEFORE = (
    "SELECT player_id, score FROM rank_scores WHERE board = ? AND score = ? AND player_id < ? "
    "ORDER BY player_id DESC LIMIT ?"
)


def scores(board: str, player_ids: Sequence[str]) -> tuple[str, list[Any]]:
    marks = ", ".join("?" * len(player_ids))
    return f"SELECT player_id, score FROM rank_scores WHERE board = ? AND player_id IN ({marks})", [board, *player_ids]


def beyond(board: str, order: Order, score: int, worse: bool, limit: int) -> tuple[str, list[Any]]:
    # going down a desc board means lower scores; the nearest come first either way
    downwards = worse == (order == "desc")
    comparison, direction = ("<", "DESC") if downwards else (">", "ASC")
    ties = "ASC" if worse else "DESC"
    sql = (
        f"SELECT player_id, score FROM rank_scores WHERE board = ? AND score {comparison} ? "
        f"ORDER BY score {direction}, player_id {ties} LIMIT ?"
    )
    return sql, [board, score, limit]


def entries(rows: Any) -> list[Entry]:
    return [Entry(str(player), int(score)) for player, score in rows]
