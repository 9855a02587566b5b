"""The ranking SQL that SQLite and MySQL share (adapters.sql.statements)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from adapters.sql.queries import PURGE_CHUNK
from adapters.sql.schema import (
    banned_players,
    board_seasons,
    boards,
    rank_nodes,
    rank_scores,
    rank_tie_nodes,
    tournament_attempts,
    tournament_players,
    tournament_seasons,
)
from adapters.sql.statements import (
    Query,
    Statement,
    insert,
    listed,
    marks,
    one_row_each,
    packed,
    padded,
    repeated_last,
)
from ports import NEVER_RESETS, BoardSettings, BoardUpdate, Entry, NodeRange, Order, Position

_bind = sa.bindparam
_board = rank_scores.c.board == _bind("board")


@functools.cache
def _sum_counts(items: int, ranges: int, tie: bool) -> Statement:
    """Each item's count of `ranges` node ranges of a board's tree, or of its score's tie tree
    (ranking.ties)."""
    n = (rank_tie_nodes if tie else rank_nodes).c

    def item(i: int) -> sa.Select[Any]:
        tree = [n.board == _bind("board"), *([n.score == _bind(f"score_{i}")] if tie else [])]
        # the tree's key in each range's terms: SQLite seeks each by the primary key only so
        return sa.select(sa.func.coalesce(sa.func.sum(n.count), 0)).where(sa.or_(*(
            sa.and_(*tree, n.level == _bind(f"level_{i}_{j}"),
                    n.prefix.between(_bind(f"first_{i}_{j}"), _bind(f"last_{i}_{j}")))
            for j in range(ranges))))
    return one_row_each(items, item)


# no nodes: what pads an item's ranges to the most of any item, the number its statement was compiled for
_NO_NODES = NodeRange(-1, 1, 0)


def sum_counts(board: str, each: Sequence[Sequence[NodeRange]], scores: Sequence[int] | None = None) -> Query:
    """Of the board's tree, each item's ranges; or, given scores, of each score's tie tree."""
    ranges = max(1, *map(len, each))
    values: dict[str, Any] = {"board": board}
    items = list(zip(each, scores if scores is not None else [0] * len(each), strict=True))
    for i, (mine, score) in enumerate(repeated_last(items)):
        for j, r in enumerate([*mine, *[_NO_NODES] * (ranges - len(mine))]):
            values |= {f"level_{i}_{j}": r.level, f"first_{i}_{j}": r.first, f"last_{i}_{j}": r.last}
        values[f"score_{i}"] = score
    return _sum_counts(padded(len(items)), ranges, scores is not None), values


_n = rank_nodes.c
NODE_COUNTS = Statement(sa.select(_n.prefix, _n.count).where(
    _n.board == _bind("board"), _n.level == _bind("level"), _n.prefix.between(_bind("first"), _bind("last")),
    _n.count > 0))
BOARD_COLUMNS = ("board", "sort_order", "operator", "reset_schedule", "epochs", "ties", "keep_seasons", "starts_at",
                 "ends_at", "max_attempts", "max_players")
_settings = sa.select(*(boards.c[column] for column in BOARD_COLUMNS))


@functools.cache
def _boards_named(count: int) -> Statement:
    return Statement(_settings.where(boards.c.board.in_(marks("board", count))))


def boards_named(names: list[str]) -> Query:
    return _boards_named(padded(len(names))), listed("board", names)


BOARDS = Statement(_settings.where(boards.c.board > _bind("after")).order_by(boards.c.board).limit(_bind("limit")))
_entries = sa.select(rank_scores.c.player_id, rank_scores.c.score, rank_scores.c.metadata, rank_scores.c.tiebreak,
                     rank_scores.c.hidden)
_s = rank_scores.c
_shown = _s.hidden == 0


@functools.cache
def _tied_between(items: int) -> Statement:
    return one_row_each(items, lambda i: sa.select(sa.func.count()).where(
        _board, _s.score == _bind(f"score_{i}"), _s.tiebreak == _bind(f"tiebreak_{i}"),
        _s.player_id >= _bind(f"from_{i}"), _s.player_id < _bind(f"player_{i}"), _shown))


def tied_between(board: str, spans: Sequence[tuple[str, Position]]) -> Query:
    """Each (from, position)'s players of the position's score and tiebreak with a playerId from
    `from` (included; "" for all) to the position's."""
    values: dict[str, Any] = {"board": board}
    for i, (first, p) in enumerate(repeated_last(spans)):
        values |= {f"score_{i}": p.score, f"tiebreak_{i}": p.tiebreak, f"from_{i}": first, f"player_{i}": p.player_id}
    return _tied_between(padded(len(spans))), values


@functools.cache
def _better_tied(items: int, down: bool) -> Statement:
    # a range of the (board, score, tiebreak) index, read to its limit at most (SQLite would take
    # the primary key's board prefix instead: every record of the board)
    return one_row_each(items, lambda i: sa.select(sa.func.count()).select_from(
        sa.select(sa.literal_column("1")).where(
            _board, _s.score == _bind(f"score_{i}"),
            *((_s.tiebreak < _bind(f"tiebreak_{i}"), _s.tiebreak >= _bind(f"bound_{i}")) if down else
              (_s.tiebreak > _bind(f"tiebreak_{i}"), _s.tiebreak <= _bind(f"bound_{i}"))), _shown)
        .with_hint(rank_scores, "INDEXED BY rank_scores_asc", "sqlite").limit(_bind("at_most")).subquery()))


def better_tied(board: str, order: Order, keys: Sequence[tuple[int, int, int]], at_most: int) -> Query:
    """Each (score, tiebreak, bound)'s players of that score with a tiebreak better than the
    tiebreak and no better than the bound, up to `at_most`."""
    values: dict[str, Any] = {"board": board, "at_most": at_most}
    for i, (score, tiebreak, bound) in enumerate(repeated_last(keys)):
        values |= {f"score_{i}": score, f"tiebreak_{i}": tiebreak, f"bound_{i}": bound}
    return _better_tied(padded(len(keys)), order == "asc"), values


_b = banned_players.c
BAN = insert(banned_players, ("player_id", "banned_at"), keys=("player_id",))
UNBAN = Statement(sa.delete(banned_players).where(_b.player_id == _bind("player")))
BANS = Statement(sa.select(_b.player_id, _b.banned_at).where(_b.player_id > _bind("after"))
                 .order_by(_b.player_id).limit(_bind("limit")))
KEYS_OF = Statement(sa.select(_s.board).where(_s.player_id == _bind("player")).order_by(_s.board))


@functools.cache
def _banned(count: int) -> Statement:
    return Statement(sa.select(_b.player_id, _b.banned_at).where(_b.player_id.in_(marks("player", count))))


def banned(player_ids: list[str]) -> Query:
    return _banned(padded(len(player_ids))), listed("player", player_ids)


@functools.cache
def _still_banned(count: int) -> Statement:
    # a shared lock on each ban row read (MySQL; SQLite's writer holds the database): a lifting
    # waits for the batch's commit, whose record its rechecks then find
    return Statement(sa.select(_b.player_id).where(_b.player_id.in_(marks("player", count))).with_for_update(
        read=True))


def still_banned(player_ids: list[str]) -> Query:
    return _still_banned(padded(len(player_ids))), listed("player", player_ids)

PUT_BOARD = insert(boards, BOARD_COLUMNS, keys=("board",), replace=BOARD_COLUMNS[1:])
# the settings, only where the board's row is still what the writer read (`was_` each column)
REPLACE_BOARD = Statement(sa.update(boards).where(
    *(boards.c[c].is_not_distinct_from(_bind(f"was_{c}")) for c in BOARD_COLUMNS)).values(
    {c: _bind(f"new_{c}") for c in BOARD_COLUMNS[1:]}))
ADD_BOARD = insert(boards, BOARD_COLUMNS, keys=("board",))
SET_SCORES = insert(rank_scores, ("board", "player_id", "score", "tiebreak", "hidden"), keys=("board", "player_id"),
                    replace=("score", "tiebreak", "hidden"))
SET_METADATA = Statement(sa.update(rank_scores).where(_board, rank_scores.c.player_id == _bind("player"))
                         .values(metadata=_bind("metadata")), in_order=("metadata", "board", "player"))
REMOVE_SCORE = Statement(sa.delete(rank_scores).where(_board, rank_scores.c.player_id == _bind("player")),
                         in_order=("board", "player"))
ADD_SEASON = insert(board_seasons, ("board", "season_start"), keys=("board", "season_start"))
# a season's rows, PURGE_CHUNK a statement on MySQL (run each until it deletes fewer), then its listing
DROP_SEASON = tuple(Statement(sa.delete(table).where(table.c.board == _bind("board"))
                              .with_dialect_options(mysql_limit=PURGE_CHUNK), in_order=("board",))
                    for table in (rank_scores, rank_nodes, rank_tie_nodes, tournament_attempts, tournament_players,
                                  tournament_seasons))
FORGET_SEASON = Statement(sa.delete(board_seasons).where(
    board_seasons.c.board == _bind("board"), board_seasons.c.season_start == _bind("start")))
SEASONS = Statement(sa.select(board_seasons.c.season_start).where(
    board_seasons.c.board == _bind("board"), board_seasons.c.season_start < _bind("before"))
    .order_by(board_seasons.c.season_start.desc()).limit(_bind("limit")))


def board_row(settings: BoardSettings) -> tuple[Any, ...]:
    """The values of PUT_BOARD and ADD_BOARD (a board that never resets has no schedule, one whose
    ties share a rank no ties)."""
    s = settings
    return (s.board, s.order, s.operator, None if s.reset == NEVER_RESETS else s.reset,
            json.dumps([list(epoch) for epoch in s.epochs]) if s.epochs else None,
            None if s.ties == "shared" else s.ties, s.keep_seasons, s.starts_at, s.ends_at, s.max_attempts,
            s.max_players)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def board_settings(row: Any) -> BoardSettings:
    board, order, operator, reset, epochs, ties, keep_seasons, starts_at, ends_at, max_attempts, max_players = row
    return BoardSettings(board, order, operator, reset or NEVER_RESETS,
                         tuple((int(since), str(schedule)) for since, schedule in json.loads(epochs)) if epochs else (),
                         ties or "shared", _int(keep_seasons), _int(starts_at), _int(ends_at), _int(max_attempts),
                         _int(max_players))


def season_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, int]]:
    """The values of ADD_SEASON: each season an update lists (a board's first starts at 0). A deletion
    of no record does not: listed, its season would count among those retention keeps."""
    return sorted({(u.settings.board, u.season or 0) for u in updates if u.lists})


def removed_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, str]]:
    """The values of REMOVE_SCORE."""
    return [(u.stored_as, player) for u in updates for player in u.removed]


def score_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, str, int, int, int]]:
    """The values of SET_SCORES."""
    return [(u.stored_as, player, score, u.tiebreaks.get(player, 0), int(player in u.hidden))
            for u in updates for player, score in u.scores.items()]


def cleared_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, int]]:
    """The values of CLEAR_TIES, run before ADD_TIE_COUNTS."""
    return [(u.stored_as, score) for u in updates for score in u.cleared]


def tie_count_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str, int, int, int, int]]:
    """The values of ADD_TIE_COUNTS."""
    return [(u.stored_as, score, level, prefix, delta)
            for u in updates for (score, level, prefix), delta in u.tie_deltas.items()]


def metadata_rows(updates: Sequence[BoardUpdate]) -> list[tuple[str | None, str, str]]:
    """The values of SET_METADATA, run after the scores are written."""
    return [(metadata, u.stored_as, player) for u in updates for player, metadata in u.metadata.items()]


ADD_COUNTS = insert(rank_nodes, ("board", "level", "prefix", "count"), keys=("board", "level", "prefix"),
                    add=("count",))
ADD_TIE_COUNTS = insert(rank_tie_nodes, ("board", "score", "level", "prefix", "count"),
                        keys=("board", "score", "level", "prefix"), add=("count",))
CLEAR_TIES = Statement(sa.delete(rank_tie_nodes).where(rank_tie_nodes.c.board == _bind("board"),
                                                       rank_tie_nodes.c.score == _bind("score")),
                       in_order=("board", "score"))


@functools.cache
def _scores(count: int) -> Statement:
    # the primary key named: MariaDB weighed the three other indexes too, a fifth of the read's
    # time (3.6 against 4.5 ms for 250 players here)
    return packed(_entries.where(_board, rank_scores.c.player_id.in_(marks("player", count)))
                  .with_hint(rank_scores, "FORCE INDEX (PRIMARY)", "mysql"))


def scores(board: str, player_ids: list[str]) -> Query:
    return _scores(padded(len(player_ids))), {"board": board, **listed("player", player_ids)}


@functools.cache
def _leaves(count: int) -> Statement:
    n = rank_nodes.c
    return packed(sa.select(n.prefix, n.count).where(n.board == _bind("board"), n.level == 0,
                                                     n.prefix.in_(marks("score", count)), n.count > 0))


def leaves(board: str, scores: list[int]) -> Query:
    return _leaves(padded(len(scores))), {"board": board, **listed("score", scores)}


@functools.cache
def _tie_nodes_at(count: int, levels: int) -> Statement:
    n = rank_tie_nodes.c
    return packed(sa.select(n.score, n.level, n.prefix, n.count).where(
        n.board == _bind("board"), n.score.in_(marks("score", count)), n.level.in_(marks("level", levels)),
        n.count > 0))


def tie_nodes_at(board: str, scores: list[int], levels: Sequence[int]) -> Query:
    return _tie_nodes_at(padded(len(scores)), padded(len(levels))), {
        "board": board, **listed("score", scores), **listed("level", levels)}


@functools.cache
def _tie_counts(count: int) -> Statement:
    n = rank_tie_nodes.c
    columns = sa.select(n.score, n.level, n.prefix, n.count)
    keys: list[tuple[sa.BindParameter[int], ...]] = [
        (_bind(f"score_{i}"), _bind(f"level_{i}"), _bind(f"prefix_{i}")) for i in range(count)]
    return packed({
        # an OR of the whole primary key's equalities, a seek each (SQLite takes no list of row
        # values after IN, and seeks the board alone unless each term names it)
        "sqlite": columns.where(n.count > 0, sa.or_(*(sa.and_(n.board == _bind("board"), n.score == score,
                                                              n.level == level, n.prefix == prefix)
                                                      for score, level, prefix in keys))),
        # a list of row values, ranges of the primary key as the OR's are, at half its cost to
        # MariaDB's optimizer (1.9 against 4.1 ms for 250 nodes here); each names the board, as
        # MySQL ranges rows that cover a prefix of the index
        "mysql": columns.where(n.count > 0, sa.tuple_(n.board, n.score, n.level, n.prefix).in_(
            [sa.tuple_(_bind("board"), *key) for key in keys])),
    })


def tie_counts(board: str, nodes: Sequence[tuple[int, int, int]]) -> Query:
    values: dict[str, Any] = {"board": board}
    for i, (score, level, prefix) in enumerate(repeated_last(nodes)):
        values |= {f"score_{i}": score, f"level_{i}": level, f"prefix_{i}": prefix}
    return _tie_counts(padded(len(nodes))), values


@functools.cache
def _at_scores(count: int) -> Statement:
    # without the hint SQLite reads the board's every record by its primary key's prefix
    return Statement(_entries.where(_board, _s.score.in_(marks("score", count)), _shown)
                     .with_hint(rank_scores, "INDEXED BY rank_scores_asc", "sqlite"))


def at_scores(board: str, scores: list[int]) -> Query:
    return _at_scores(padded(len(scores))), {"board": board, **listed("score", scores)}


def _past(step: str, down: bool, worse: bool) -> tuple[sa.ColumnElement[bool], ...]:
    score: sa.BindParameter[int] = _bind("score")
    tiebreak: sa.BindParameter[int] = _bind("tiebreak")
    player: sa.BindParameter[str] = _bind("player")
    past = {
        "tied": (_s.score == score, _s.tiebreak == tiebreak, _s.player_id > player if worse else _s.player_id < player),
        "score": (_s.score == score, _s.tiebreak < tiebreak if down else _s.tiebreak > tiebreak),
        "beyond": (_s.score < score if down else _s.score > score,),
    }[step]
    return (_board, *past, _shown)


@functools.cache
def _following(step: str, down: bool, worse: bool) -> Statement:
    """One step of `following`: the players of the same score and tiebreak past the player
    ("tied"), of the same score past the tiebreak ("score"), or past the score ("beyond"); going
    down the values or up them, and worse or better (ties by playerId ascending going worse);
    `skip` of them left out."""
    return Statement(_entries.where(*_past(step, down, worse)).order_by(
        _s.score.desc() if down else _s.score.asc(), _s.tiebreak.desc() if down else _s.tiebreak.asc(),
        _s.player_id.asc() if worse else _s.player_id.desc()).limit(_bind("limit")).offset(_bind("skip")))


@functools.cache
def _count_following(step: str, down: bool, worse: bool) -> Statement:
    """How many players one step of `following` has."""
    return Statement(sa.select(sa.func.count()).where(*_past(step, down, worse)))


FOLLOWING_STEPS = ("tied", "score", "beyond")


def following(step: str, board: str, order: Order, position: Position, *, worse: bool, limit: int,
              skip: int = 0, count: bool = False) -> Query:
    """A step's players (its count of them, for `count`); going worse on a desc board goes down the values."""
    statement = _count_following if count else _following
    return statement(step, worse == (order == "desc"), worse), {
        "board": board, "score": position.score, "tiebreak": position.tiebreak, "player": position.player_id,
        "limit": limit, "skip": skip}


def entries(rows: Any) -> list[Entry]:
    return [Entry(str(player), int(score), metadata, int(tiebreak), bool(hidden))
            for player, score, metadata, tiebreak, hidden in rows]
