"""Rank and score-at-rank, read from a board's node counts in O(B * log_B(range)) rows."""

from __future__ import annotations

from ports import NodeReader, Order
from ranking.tree import Tree, best_first


def rank_of(tree: Tree, reader: NodeReader, board: str, order: Order, score: int) -> int:
    """1 + the players strictly better: ties share a rank (1, 2, 2, 4)."""
    return 1 + reader.sum_counts(board, tree.better_ranges(score, order))


def score_at(tree: Tree, reader: NodeReader, board: str, order: Order, position: int) -> int | None:
    """The score of the player at this 1-based position (best first), or None past the last one:
    walks down from the top, one level at a time, into the child that holds the position."""
    nodes = tree.top_range()
    for level in range(tree.top, -1, -1):
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
