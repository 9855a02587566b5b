"""Rank and score-at-rank, read from a board's node counts in O(B * log_B(range)) rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ports import BoardSettings, Entry, NodeRange, NodeReader, Order, RankingStore
from ports.limits import INT64_MAX, INT64_MIN
from ranking import ties
from ranking.ties import TIE_TREE, tie_roots
from ranking.tree import Tree, best_first, better


def ranks_of_scores(tree: Tree, reader: NodeReader, board: str, order: Order, scores: Sequence[int]) -> list[int]:
    """For each score, 1 + the players with a strictly better score: ties share a rank (1, 2, 2, 4)."""
    return [1 + better for better in reader.sum_counts(board, [tree.better_ranges(s, order) for s in scores])]


def rank_of(tree: Tree, reader: NodeReader, board: str, order: Order, score: int) -> int:
    (rank,) = ranks_of_scores(tree, reader, board, order, [score])
    return rank


def rank_and_players(tree: Tree, reader: NodeReader, board: str, order: Order, score: int) -> tuple[int, int]:
    """A score's rank (ties sharing it) and how many players have the score, in one statement."""
    better, there = reader.sum_counts(board, [tree.better_ranges(score, order), [NodeRange(0, score, score)]])
    return 1 + better, there


def rank_of_entry(tree: Tree, store: RankingStore, board: str, settings: BoardSettings, entry: Entry) -> int:
    """A record's rank: on a board whose ties do not share a rank, after those of its score with a
    better tiebreak (their tie tree, ranking.ties) or the same tiebreak and a smaller playerId."""
    if settings.ties == "shared":
        return rank_of(tree, store, board, settings.order, entry.score)
    rank, there = rank_and_players(tree, store, board, settings.order, entry.score)
    return rank + ahead_among_ties(store, board, settings, [entry], {entry.score: there})[0]


def ahead_among_ties(store: RankingStore, board: str, settings: BoardSettings, entries: Sequence[Entry],
                     players: Mapping[int, int] | None = None) -> list[int]:
    """On a board whose ties do not share a rank, for each record the players of its score ranked
    before it: those with a better tiebreak from the score's tie tree where it has TIE_TREE_FROM
    players (`players`: score → its players, read when not given), else from the index."""
    if players is None:
        players = store.leaves(board, list({e.score for e in entries}))
    large = [i for i, e in enumerate(entries) if ties.treed(players.get(e.score, 0))]
    small = [i for i, e in enumerate(entries) if not ties.treed(players.get(e.score, 0))]
    counted = store.better_tied(board, settings.order, [(entries[i].score, entries[i].tiebreak) for i in small],
                                ties.TIE_TREE_FROM)
    summed = store.tie_sums(board, [(entries[i].score, TIE_TREE.better_ranges(entries[i].tiebreak, settings.order))
                                    for i in large])
    better = dict(zip([*small, *large], [*counted, *summed], strict=True))
    tied = store.tied_before(board, [e.position for e in entries])
    return [better[i] + t for i, t in zip(range(len(entries)), tied, strict=True)]


def rank_of_score(tree: Tree, store: RankingStore, board: str, settings: BoardSettings, score: int, *,
                  subscore: int | None = None) -> int:
    """The rank a record of this score would have. Where ties do not share a rank, it would come
    after the players already at the score (reached later), or, with a subscore, after those of the
    score whose tiebreak is at least as good."""
    if settings.ties == "shared":
        return rank_of(tree, store, board, settings.order, score)
    rank, there = rank_and_players(tree, store, board, settings.order, score)
    if settings.ties == "earliest" or subscore is None or there == 0:
        return rank + there
    if not ties.treed(there):  # those there with a tiebreak at least as good, from the index
        after = subscore - 1 if settings.order == "desc" else subscore + 1
        if not INT64_MIN <= after <= INT64_MAX:  # every tiebreak is as good
            return rank + there
        (ahead,) = store.better_tied(board, settings.order, [(score, after)], there)
        return rank + ahead
    root = tie_roots(store, board, [score]).get(score)
    if root is not None and (root[0] == 0 or TIE_TREE.prefix(subscore, root[0]) != root[1]):
        # the subscore is one all of the tree's players have, or outside the tree: all or none ahead
        level, prefix = root
        return rank + there * ((level == 0 and subscore == prefix)
                               or better(settings.order, prefix, TIE_TREE.prefix(subscore, level)))
    (ahead,) = store.tie_sums(board, [(score, [*TIE_TREE.better_ranges(subscore, settings.order),
                                               NodeRange(0, subscore, subscore)])])
    return rank + ahead


def score_at(tree: Tree, reader: NodeReader, board: str, order: Order, position: int) -> int | None:
    """The score of the player at this 1-based position (best first), or None past the last one:
    walks down from the top, one level at a time, into the child that holds the position."""
    nodes = tree.top_range()
    for level in reversed(tree.levels):
        counts = reader.node_counts(board, nodes)
        for prefix in best_first(order, counts):
            if position <= counts[prefix]:
                break
            position -= counts[prefix]
        else:
            return None
        if level == 0:
            return prefix
        nodes = tree.children(level, prefix)
    raise AssertionError("unreachable: level 0 returns")
