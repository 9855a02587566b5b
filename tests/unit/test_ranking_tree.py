"""The tree's arithmetic against brute force, over the whole int64 range, both orders, several
branching factors: an in-memory node store stands in for SQL here (storages have their own suite)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ports import BoardSettings, NodeRange, Order
from ports.limits import INT64_MAX, INT64_MIN
from ranking.queries import rank_of, score_at
from ranking.ties import combine_key
from ranking.tree import DEFAULT_TREE, Tree, combine

scores = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX]),
    st.integers(-20, 20),
)
trees = st.sampled_from([Tree(1), Tree(4), Tree(5), Tree(8), Tree(16), Tree(8, unit=4), Tree(16, unit=4),
                         Tree(6, unit=2)])
orders = st.sampled_from(["desc", "asc"])


class MemoryNodes:
    def __init__(self, tree: Tree, players: Sequence[int]) -> None:
        self.counts = Counter(node for score in players for node in tree.path(score))

    @classmethod
    def of(cls, counts: Counter[tuple[int, int]]) -> MemoryNodes:
        nodes = cls(Tree(), [])
        nodes.counts = counts
        return nodes

    def sum_counts(self, board: str, each: Sequence[Sequence[NodeRange]]) -> list[int]:
        return [sum(c for (level, p), c in self.counts.items()
                    for r in ranges if level == r.level and r.first <= p <= r.last) for ranges in each]

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        return {p: c for (level, p), c in self.counts.items() if level == nodes.level and nodes.first <= p <= nodes.last
                and c}


def brute_rank(players: Sequence[int], order: str, score: int) -> int:
    return 1 + sum(1 for s in players if (s > score if order == "desc" else s < score))


@settings(max_examples=300)
@given(trees, orders, st.lists(scores, max_size=40), scores)
def test_rank_is_one_plus_strictly_better(tree, order, players, probe):
    nodes = MemoryNodes(tree, players)
    for score in [probe, *players]:
        assert rank_of(tree, nodes, "b", order, score) == brute_rank(players, order, score)


@settings(max_examples=300)
@given(trees, orders, st.lists(scores, max_size=40))
def test_score_at_each_position_matches_the_sorted_list(tree, order, players):
    nodes = MemoryNodes(tree, players)
    ranked = sorted(players, reverse=order == "desc")
    for position, score in enumerate(ranked, start=1):
        assert score_at(tree, nodes, "b", order, position) == score
    assert score_at(tree, nodes, "b", order, len(players) + 1) is None


@given(trees, st.lists(st.tuples(st.one_of(st.none(), scores), st.one_of(st.none(), scores)), max_size=30))
def test_deltas_move_players_between_paths(tree, moves):
    before = Counter(node for old, _ in moves if old is not None for node in tree.path(old))
    after = Counter(node for _, new in moves if new is not None for node in tree.path(new))
    expected = {node: after[node] - before[node] for node in before | after if after[node] != before[node]}
    assert tree.deltas(moves) == expected


def test_prefixes_of_the_extremes():
    for tree, levels in ((Tree(4), 17), (DEFAULT_TREE, 9)):
        assert tree.top == 16
        assert tree.prefix(INT64_MIN, tree.top) == -1 and tree.prefix(INT64_MAX, tree.top) == 0
        assert len(tree.path(0)) == levels


@given(st.lists(st.tuples(st.one_of(st.none(), scores), st.one_of(st.none(), scores)), max_size=30))
def test_the_deployed_tree_is_the_even_levels_of_the_tree_of_sixteen(moves):
    """What lets a worker of either write a board the other wrote (ranking.tree.DEFAULT_TREE)."""
    assert DEFAULT_TREE.levels == tuple(range(0, 17, 2))
    assert DEFAULT_TREE.deltas(moves) == {node: delta for node, delta in Tree(4).deltas(moves).items()
                                          if node[0] % 2 == 0}


@given(orders, st.lists(st.tuples(st.one_of(st.none(), scores), st.one_of(st.none(), scores)), max_size=30),
       st.integers(0, 30), scores)
def test_a_board_written_by_workers_of_both_trees_ranks_right_by_the_deployed_one(order, moves, switch, probe):
    """Players moved by a worker of B = 16, then by one of the deployed tree (a deployment's overlap)."""
    players: Counter[int] = Counter()
    counts: Counter[tuple[int, int]] = Counter()
    for i, (was, new) in enumerate(moves):
        old = was if was is not None and players[was] else None  # a player moves from where one is
        counts.update((DEFAULT_TREE if i >= switch else Tree(4)).deltas([(old, new)]))
        players.subtract([old] if old is not None else [])
        players.update([new] if new is not None else [])
    nodes = MemoryNodes.of(counts)
    standing = list(players.elements())
    for score in [probe, *standing]:
        assert rank_of(DEFAULT_TREE, nodes, "b", order, score) == brute_rank(standing, order, score)
    ranked = sorted(standing, reverse=order == "desc")
    assert [score_at(DEFAULT_TREE, nodes, "b", order, p) for p in range(1, len(ranked) + 2)] == [*ranked, None]


@given(orders, st.one_of(st.none(), scores), scores)
def test_operators(order, old, value):
    assert combine("set", order, old, value) == value
    total = value if old is None else old + value
    assert combine("incr", order, old, value) == max(INT64_MIN, min(INT64_MAX, total))
    best = combine("best", order, old, value)
    assert best == value if old is None else best == (max if order == "desc" else min)(old, value)


@given(orders, st.sampled_from(["incr", "decr"]), st.one_of(st.none(), st.tuples(scores, scores)), scores, scores)
def test_a_subscore_board_counts_both_from_zero_the_first_update_too(order, operator, old, value, subscore):
    """Found from outside: decr on a subscore board stored a new player's first score as sent."""
    sign = 1 if operator == "incr" else -1
    score, second = old or (0, 0)
    expected = tuple(max(INT64_MIN, min(INT64_MAX, a + sign * b)) for a, b in ((score, value), (second, subscore)))
    settings = BoardSettings("b", order, operator, ties="subscore")
    assert combine_key(settings, old, value, subscore) == expected
    assert combine(operator, order, None if old is None else old[0], value) == expected[0]


def test_a_tree_numbers_its_levels_in_units_that_divide_its_bits():
    for bits, unit in ((6, 4), (4, 8)):
        with pytest.raises(ValueError, match="units"):
            Tree(bits, unit=unit)


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_best_on_a_subscore_board_takes_a_subscore_only_with_the_same_score(order: Order) -> None:
    """best keeps the better (score, subscore) pair: a worse score never wins by its subscore."""
    settings = BoardSettings("b", order, "best", ties="subscore")
    sign = 1 if order == "desc" else -1  # `sign * x` is better the greater x is
    old = (sign * 5, sign * -1)
    assert combine_key(settings, old, sign * 4, sign * 9) == old
    assert combine_key(settings, old, sign * 5, sign * 9) == (sign * 5, sign * 9)
    assert combine_key(settings, old, sign * 6, sign * -9) == (sign * 6, sign * -9)
