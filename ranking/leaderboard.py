"""Leaderboard reads: settings, a player's rank, top-N, around a player, the rank of a score.
Ranks come from the tree (one rank query, one leaf-count query per list), lists from the score
index, so every answer costs O(log range + entries), whatever the number of players."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Concatenate, ParamSpec, TypeVar

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import BoardSettings as Stored  # BoardSettings here is the answer
from ports import Entry, NodeRange, Operator, Order, RankingStore
from ports.cursors import decode_cursor, encode_cursor
from ports.errors import NotFound
from ports.limits import Int64Answer
from ranking.model import BoardSettingsBody
from ranking.queries import rank_of, score_at
from ranking.tree import Tree

MAX_TOP = 1000
MAX_RADIUS = 100
MAX_BOARDS = 1000
_CURSOR_KIND = "b"

Rank = Annotated[int, Field(ge=1)]


@with_config(ConfigDict(extra="forbid"))
class BoardSettings(TypedDict):
    board: str
    order: Order
    operator: Operator


@with_config(ConfigDict(extra="forbid"))
class Board(BoardSettings):
    """Settings and player count."""

    players: Annotated[int, Field(ge=0)]


@with_config(ConfigDict(extra="forbid"))
class BoardPage(TypedDict):
    boards: list[BoardSettings]
    nextCursor: str | None


@with_config(ConfigDict(extra="forbid"))
class RankedEntry(TypedDict):
    """A player's score and exact rank, alone (GET .../players/{playerId}) or in a list."""

    rank: Rank
    playerId: str
    score: Int64Answer


@with_config(ConfigDict(extra="forbid"))
class Entries(TypedDict):
    """Ties share a rank and are ordered by playerId."""

    entries: list[RankedEntry]


@with_config(ConfigDict(extra="forbid"))
class ScoreRank(TypedDict):
    """The rank that score would have."""

    score: Int64Answer
    rank: Rank


P = ParamSpec("P")
R = TypeVar("R")


def _one_state(read: Callable[Concatenate[RankingStore, P], R]) -> Callable[Concatenate[RankingStore, P], R]:
    """A read whose queries all see one state of the store: the worker writes meanwhile, and a
    list's ranks read after its entries once found a score's last player gone (a KeyError, a 500)."""

    @functools.wraps(read)
    def in_snapshot(store: RankingStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with store.snapshot():
            return read(store, *args, **kwargs)

    return in_snapshot


def _board(store: RankingStore, board: str) -> Stored:
    settings = store.get_board(board)
    if settings is None:
        raise NotFound(f"no leaderboard {board}")
    return settings


@_one_state
def describe(store: RankingStore, tree: Tree, board: str) -> Board:
    settings = _board(store, board)
    players = store.sum_counts(board, [tree.top_range()])
    return {"board": board, "order": settings.order, "operator": settings.operator, "players": players}


def boards(store: RankingStore, *, limit: int = 100, cursor: str | None = None) -> BoardPage:
    """The boards by name, with their settings."""
    found = store.boards(decode_cursor(cursor, _CURSOR_KIND) or "", limit + 1)
    page = found[:limit]
    return {
        "boards": [{"board": b.board, "order": b.order, "operator": b.operator} for b in page],
        "nextCursor": encode_cursor(_CURSOR_KIND, page[-1].board) if len(found) > limit else None,
    }


def configure(store: RankingStore, board: str, body: BoardSettingsBody) -> BoardSettings:
    """`board` is a name the route took (ranking.model.NAME_PATTERN)."""
    store.put_board(Stored(board, body.order, body.operator))
    return {"board": board, "order": body.order, "operator": body.operator}


def _ranked(
    store: RankingStore, tree: Tree, settings: Stored, entries: Sequence[Entry]
) -> list[RankedEntry]:
    """Ranks for a contiguous run of the board: the first from the tree, the rest by adding the
    leaf counts of the scores passed (ties share a rank: 1, 2, 2, 4)."""
    if not entries:
        return []
    board = settings.board
    rank = rank_of(tree, store, board, settings.order, entries[0].score)
    scores = [e.score for e in entries]
    counts = store.node_counts(board, NodeRange(0, min(scores), max(scores)))
    ranked: list[RankedEntry] = []
    previous = entries[0].score
    for entry in entries:
        if entry.score != previous:
            rank += counts[previous]
            previous = entry.score
        ranked.append({"rank": rank, "playerId": entry.player_id, "score": entry.score})
    return ranked


@_one_state
def player(store: RankingStore, tree: Tree, board: str, player_id: str) -> RankedEntry:
    settings = _board(store, board)
    score = store.scores(board, [player_id]).get(player_id)
    if score is None:
        raise NotFound(f"player {player_id} has no score on {board}")
    return {"playerId": player_id, "score": score, "rank": rank_of(tree, store, board, settings.order, score)}


@_one_state
def top(store: RankingStore, tree: Tree, board: str, *, limit: int = 10, offset: int = 0) -> Entries:
    settings = _board(store, board)
    first = score_at(tree, store, board, settings.order, offset + 1)
    if first is None:
        return {"entries": []}
    better = rank_of(tree, store, board, settings.order, first) - 1
    entries = store.tied(board, first, "", limit, skip=offset - better)
    if len(entries) < limit:
        entries += store.beyond(board, settings.order, first, worse=True, limit=limit - len(entries))
    return {"entries": _ranked(store, tree, settings, entries)}


@_one_state
def around(store: RankingStore, tree: Tree, board: str, player_id: str, *, radius: int = 5) -> Entries:
    settings = _board(store, board)
    score = store.scores(board, [player_id]).get(player_id)
    if score is None:
        raise NotFound(f"player {player_id} has no score on {board}")
    above = store.tied_before(board, score, player_id, radius)
    if len(above) < radius:
        above += store.beyond(board, settings.order, score, worse=False, limit=radius - len(above))
    below = store.tied(board, score, player_id, radius)
    if len(below) < radius:
        below += store.beyond(board, settings.order, score, worse=True, limit=radius - len(below))
    entries = [*reversed(above), Entry(player_id, score), *below]
    return {"entries": _ranked(store, tree, settings, entries)}


@_one_state
def rank_for_score(store: RankingStore, tree: Tree, board: str, score: int) -> ScoreRank:
    settings = _board(store, board)
    return {"score": score, "rank": rank_of(tree, store, board, settings.order, score)}
