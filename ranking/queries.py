"""Rank and score-at-rank, read from a board's node counts in O(B * log_B(range)) rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ports import BoardSettings, Entry, NodeRange, NodeReader, Order, RankingStore
from ports.limits import INT64_MAX, INT64_MIN
from ranking import ties
from ranking.ties import TIE_TREE, tie_tops
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
    players (`players`: score → its players, read when not given), and those within the entry's
    node of the tree's floor from the index; else from the index alone."""
    if players is None:
        players = store.leaves(board, list({e.score for e in entries}))
    order = settings.order
    large = [i for i, e in enumerate(entries) if ties.treed(players.get(e.score, 0))]
    treed = sorted({entries[i].score for i in large})
    # the tree's counts, down to its floor, and the floors (a count each) in the same statements
    sums = store.tie_sums(board, [*((entries[i].score, TIE_TREE.better_ranges(entries[i].tiebreak, order))
                                    for i in large), *((s, [NodeRange(ties.FLOOR_LEVEL, 0, 0)]) for s in treed)])
    summed, floors = sums[: len(large)], dict(zip(treed, sums[len(large) :], strict=True))
    # a small tie's players from the index; in a tie tree, those of the member's node of its floor
    floor_of: dict[int, int | None] = {i: floors[entries[i].score] for i in large}
    counted = [(i, _bound(order, e.tiebreak, floor_of.get(i))) for i, e in enumerate(entries)]
    from_index = [(i, bound) for i, bound in counted if bound is not None]
    found = store.better_tied(board, order, [(entries[i].score, entries[i].tiebreak, bound) for i, bound in from_index],
                              ties.TIE_TREE_FROM)
    better = dict.fromkeys(range(len(entries)), 0)
    for i, n in [*zip([i for i, _ in from_index], found, strict=True), *zip(large, summed, strict=True)]:
        better[i] += n
    tied = store.tied_before(board, [e.position for e in entries])
    return [better[i] + t for i, t in zip(range(len(entries)), tied, strict=True)]


def _bound(order: Order, tiebreak: int, floor: int | None) -> int | None:
    """How far from `tiebreak` (the better way) its players better than it are counted from the
    index: all of them (floor None: no tie tree), those of its node of a tie tree's floor, or none
    (a floor of 0: the tree counts them all)."""
    if floor is None:
        return ties.best_tiebreak(order)
    if not floor:
        return None
    first, last = ties.floor_span(tiebreak, floor)
    return last if order == "desc" else first


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
    # the tiebreak just worse than the subscore: those better than it are at least as good
    after = subscore - 1 if settings.order == "desc" else subscore + 1
    if not ties.treed(there):  # those there with a tiebreak at least as good, from the index
        if not INT64_MIN <= after <= INT64_MAX:  # every tiebreak is as good
            return rank + there
        (ahead,) = store.better_tied(board, settings.order, [(score, after, ties.best_tiebreak(settings.order))], there)
        return rank + ahead
    roots, floors = tie_tops(store, board, [score])
    root = roots.get(score)
    if root is not None and (root[0] == 0 or TIE_TREE.prefix(subscore, root[0]) != root[1]):
        # the subscore is one all of the tree's players have, or outside the tree: all or none ahead
        level, prefix = root
        return rank + there * ((level == 0 and subscore == prefix)
                               or better(settings.order, prefix, TIE_TREE.prefix(subscore, level)))
    floor = floors.get(score, 0)
    # those of the subscore's node of the floor at least as good, from the index (or all of the node)
    within = _bound(settings.order, subscore, floor) if floor and INT64_MIN <= after <= INT64_MAX else None
    whole = NodeRange(floor, TIE_TREE.prefix(subscore, floor), TIE_TREE.prefix(subscore, floor))
    (ahead,) = store.tie_sums(board, [(score, [*TIE_TREE.better_ranges(subscore, settings.order),
                                               *([] if within is not None else [whole])])])
    if within is not None:
        (more,) = store.better_tied(board, settings.order, [(score, after, within)], ties.TIE_TREE_FROM)
        ahead += more
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
