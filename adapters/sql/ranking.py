"""The ranking SQL that SQLite and MySQL share (adapters.sql.statements)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from adapters.sql.schema import board_seasons, boards, rank_nodes, rank_scores
from adapters.sql.statements import Query, Statement, insert, listed, marks, padded
from ports import NEVER_RESETS, BoardSettings, BoardUpdate, Entry, NodeRange, Order

_bind = sa.bindparam
_board = rank_scores.c.board == _bind("board")


@functools.cache
def _sum_counts(ranges: int) -> Statement:
    n = rank_nodes.c
    return Statement(sa.select(sa.func.coalesce(sa.func.sum(n.count), 0)).where(n.board == _bind("board"), sa.or_(*(
        sa.and_(n.level == _bind(f"level_{i}"), n.prefix.between(_bind(f"first_{i}"), _bind(f"last_{i}")))
        for i in range(ranges)))))


def sum_counts(board: str, ranges: list[NodeRange]) -> Query:
    values: dict[str, Any] = {"board": board}
    for i, r in enumerate(ranges):
        values |= {f"level_{i}": r.level, f"first_{i}": r.first, f"last_{i}": r.last}
    return _sum_counts(len(ranges)), values


_n = rank_nodes.c
NODE_COUNTS = Statement(sa.select(_n.prefix, _n.count).where(
    _n.board == _bind("board"), _n.level == _bind("level"), _n.prefix.between(_bind("first"), _bind("last")),
    _n.count > 0))
_settings = sa.select(boards.c.board, boards.c.sort_order, boards.c.operator, boards.c.reset_schedule,
                      boards.c.epochs)
GET_BOARD = Statement(_settings.where(boards.c.board == _bind("board")))
BOARDS = Statement(_settings.where(boards.c.board > _bind("after")).order_by(boards.c.board).limit(_bind("limit")))
_entries = sa.select(rank_scores.c.player_id, rank_scores.c.score, rank_scores.c.metadata)
_tied = (_board, rank_scores.c.score == _bind("score"))
TIED = Statement(_entries.where(*_tied, rank_scores.c.player_id > _bind("player"))
                 .order_by(rank_scores.c.player_id).limit(_bind("limit")).offset(_bind("skip")))
TIED_BEFORE = Statement(_entries.where(*_tied, rank_scores.c.player_id < _bind("player"))
                        .order_by(rank_scores.c.player_id.desc()).limit(_bind("limit")))

_BOARD_COLUMNS = ("board", "sort_order", "operator", "reset_schedule", "epochs")
PUT_BOARD = insert(boards, _BOARD_COLUMNS, keys=("board",), replace=_BOARD_COLUMNS[1:])
ADD_BOARD = insert(boards, _BOARD_COLUMNS, keys=("board",))
SET_SCORES = insert(rank_scores, ("board", "player_id", "score"), keys=("board", "player_id"), replace=("score",))
SET_METADATA = Statement(sa.update(rank_scores).where(_board, rank_scores.c.player_id == _bind("player"))
                         .values(metadata=_bind("metadata")), in_order=("metadata", "board", "player"))
REMOVE_SCORE = Statement(sa.delete(rank_scores).where(_board, rank_scores.c.player_id == _bind("player")),
                         in_order=("board", "player"))
ADD_SEASON = insert(board_seasons, ("board", "season_start"), keys=("board", "season_start"))
SEASONS = Statement(sa.select(board_seasons.c.season_start).where(
    board_seasons.c.board == _bind("board"), board_seasons.c.season_start < _bind("before"))
    .order_by(board_seasons.c.season_start.desc()).limit(_bind("limit")))


def board_row(settings: BoardSettings) -> tuple[str, str, str, str | None, str | None]:
    """The values of PUT_BOARD and ADD_BOARD (a board that never resets has no schedule)."""
    return (settings.board, settings.order, settings.operator,
            None if settings.reset == NEVER_RESETS else settings.reset,
            json.dumps([list(epoch) for epoch in settings.epochs]) if settings.epochs else None)


def board_settings(row: Any) -> BoardSettings:
    board, order, operator, reset, epochs = row
    return BoardSettings(board, order, operator, reset or NEVER_RESETS,
                         tuple((int(since), str(schedule)) for since, schedule in json.loads(epochs)) if epochs else ())


def season_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, int]]:
    """The values of ADD_SEASON: each season an update writes to (a board's first starts at 0)."""
    return sorted({(u.settings.board, u.season or 0) for u in updates})


def removed_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, str]]:
    """The values of REMOVE_SCORE."""
    return [(u.stored_as, player) for u in updates for player in u.removed]


def metadata_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str | None, str, str]]:
    """The values of SET_METADATA, run after the scores are written."""
    return [(metadata, u.stored_as, player) for u in updates for player, metadata in u.metadata.items()]


ADD_COUNTS = insert(rank_nodes, ("board", "level", "prefix", "count"), keys=("board", "level", "prefix"),
                    add=("count",))


@functools.cache
def _scores(count: int) -> Statement:
    return Statement(_entries.where(_board, rank_scores.c.player_id.in_(marks("player", count))))


def scores(board: str, player_ids: list[str]) -> Query:
    return _scores(padded(len(player_ids))), {"board": board, **listed("player", player_ids)}


@functools.cache
def _beyond(downwards: bool, worse: bool) -> Statement:
    s = rank_scores.c
    # the nearest come first either way; among ties, the way the board lists them
    return Statement(
        _entries.where(_board, s.score < _bind("score") if downwards else s.score > _bind("score"))
        .order_by(s.score.desc() if downwards else s.score.asc(), s.player_id.asc() if worse else s.player_id.desc())
        .limit(_bind("limit"))
    )


def beyond(board: str, order: Order, score: int, worse: bool, limit: int) -> Query:
    # going down a desc board means lower scores
    return _beyond(worse == (order == "desc"), worse), {"board": board, "score": score, "limit": limit}


def entries(rows: Any) -> list[Entry]:
    return [Entry(str(player), int(score), metadata) for player, score, metadata in rows]
