"""Tie trees kept below their roots (ranking.ties) against brute force: batches of players joining,
leaving and moving between a few scores, with tiebreaks that share many top bytes, differ in sign
or sit at the int64 extremes, so roots are made at every level, raised, and given up. After each
batch every member's players ahead and the rank of any (score, subscore) equal counting by hand,
and a tree never keeps a row at a level at or above its root. An in-memory store stands in for
SQL here (storages have their own suite). Trees begin at 2 players, at 3 (scores cross into trees
and out of them), and at the default, where these ties are all counted from the index."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ports import BoardSettings, Entry, NodeRange, Order
from ports.limits import INT64_MAX, INT64_MIN
from ranking import ties
from ranking.queries import ahead_among_ties, rank_of_score
from ranking.ties import ROOT_LEVEL, TIE_TREE, tie_changes, tie_tops
from ranking.tree import DEFAULT_TREE as TREE
from ranking.tree import better

PLAYERS = [f"p{n}" for n in range(8)]
SCORES = [0, 1, 2]
BASE = 1_764_000_000_000  # a receipt time: its top bytes are every near one's
tiebreaks = st.one_of(
    st.integers(-3, 3),
    st.integers(BASE, BASE + 3).map(lambda t: -t),
    st.sampled_from([INT64_MIN, INT64_MAX, 255, 256, -256, -257, 1 << 40, -(1 << 40) - 1]),
)
keys = st.none() | st.tuples(st.sampled_from(SCORES), tiebreaks)
batches = st.lists(st.dictionaries(st.sampled_from(PLAYERS), keys, min_size=1, max_size=6), min_size=1, max_size=8)


class MemoryTies:
    """The store's reads tie_changes and the rank queries make, over players' keys and tie rows."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[int, int]] = {}
        self.rows: dict[tuple[int, int, int], int] = defaultdict(int)

    def leaves(self, board: str, scores: Sequence[int]) -> dict[int, int]:
        counts = Counter(score for score, _ in self.keys.values())
        return {s: counts[s] for s in scores if counts[s]}

    def at_scores(self, board: str, scores: Sequence[int]) -> list[Entry]:
        return [Entry(p, s, tiebreak=t) for p, (s, t) in self.keys.items() if s in scores]

    def tie_nodes_at(self, board: str, scores: Sequence[int],
                     levels: Sequence[int]) -> dict[tuple[int, int], tuple[int, int]]:
        return {(s, level): (prefix, count) for (s, level, prefix), count in self.rows.items()
                if s in scores and level in levels and count}

    def tie_counts(self, board: str, nodes: Sequence[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
        return {node: self.rows[node] for node in nodes if self.rows.get(node)}

    def tie_sums(self, board: str, each: Sequence[tuple[int, Sequence[NodeRange]]]) -> list[int]:
        return [sum(count for (s, level, prefix), count in self.rows.items() if s == score
                    for r in ranges if level == r.level and r.first <= prefix <= r.last) for score, ranges in each]

    def better_tied(self, board: str, order: Order, keys: Sequence[tuple[int, int, int]], at_most: int) -> list[int]:
        return [min(at_most, sum(s == score and better(order, t, tiebreak) and not better(order, t, bound)
                                 for s, t in self.keys.values()))
                for score, tiebreak, bound in keys]

    def tied_before(self, board: str, positions: Sequence[object]) -> list[int]:
        return [sum(1 for p, key in self.keys.items() if key == (pos.score, pos.tiebreak) and p < pos.player_id)
                for pos in positions]  # type: ignore[attr-defined]

    def sum_counts(self, board: str, each: Sequence[Sequence[NodeRange]]) -> list[int]:
        nodes = Counter(node for score, _ in self.keys.values() for node in TREE.path(score))
        return [sum(c for (level, p), c in nodes.items() for r in ranges if level == r.level and r.first <= p <= r.last)
                for ranges in each]

    def apply(self, batch: dict[str, tuple[int, int] | None]) -> None:
        moves = {p: (self.keys.get(p), key) for p, key in batch.items() if self.keys.get(p) != key}
        deltas, cleared = tie_changes(self, "b", moves)  # type: ignore[arg-type]
        for node in [node for node in self.rows if node[0] in cleared]:
            del self.rows[node]
        for node, delta in deltas.items():
            self.rows[node] += delta
        for player, (_, key) in moves.items():
            if key is None:
                del self.keys[player]
            else:
                self.keys[player] = key


@settings(max_examples=400, deadline=None)
@given(batches=batches, order=st.sampled_from(["desc", "asc"]), probe=tiebreaks,
       tree_from=st.sampled_from([2, 3, ties.TIE_TREE_FROM]), floor_room=st.sampled_from([1, ties.FLOOR_ROOM]))
def test_rooted_tie_trees_rank_as_brute_force(batches: list[dict[str, tuple[int, int] | None]], order: Order,
                                              probe: int, tree_from: int, floor_room: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ties, "TIE_TREE_FROM", tree_from)
        patch.setattr(ties, "FLOOR_ROOM", floor_room)
        _rank_as_brute_force(batches, order, probe)


def _rank_as_brute_force(batches: list[dict[str, tuple[int, int] | None]], order: Order, probe: int) -> None:
    store = MemoryTies()
    board = BoardSettings("b", order, ties="subscore")
    for batch in batches:
        store.apply(batch)
        members = defaultdict(dict)
        for player, (score, tiebreak) in store.keys.items():
            members[score][player] = tiebreak
        for score in SCORES:
            tied = members[score]
            entries = [Entry(p, score, tiebreak=t) for p, t in sorted(tied.items())]
            expected = [sum(better(order, u, e.tiebreak) or (u == e.tiebreak and q < e.player_id)
                            for q, u in tied.items()) for e in entries]
            if len(tied) >= 2:
                assert ahead_among_ties(store, "b", board, entries) == expected  # type: ignore[arg-type]
            strictly = sum(better(order, s, score) for s, _ in store.keys.values())
            at_least_as_good = sum(not better(order, probe, t) for t in tied.values())
            assert rank_of_score(TREE, store, "b", board, score, subscore=probe) == 1 + strictly + at_least_as_good  # type: ignore[arg-type]
            roots, floors = tie_tops(store, "b", [score])  # type: ignore[arg-type]
            if not ties.treed(len(tied)):  # no tree: no rows
                assert not any(s == score and c for (s, _, _), c in store.rows.items())
            elif score in roots:  # nothing kept at or above the root
                root_level, root_prefix = roots[score]
                assert all(TIE_TREE.prefix(t, root_level) == root_prefix for t in tied.values())
                assert not any(s == score and root_level <= level < ROOT_LEVEL and c
                               for (s, level, _), c in store.rows.items())
            floor = floors.get(score, 0)
            if floor:  # nothing kept below the floor, and each node of it counted from the index
                assert ties.treed(len(tied)) and not any(s == score and level < floor and c
                                                         for (s, level, _), c in store.rows.items())
                assert not ties.treed(max(Counter(TIE_TREE.prefix(t, floor) for t in tied.values()).values()))


def test_receipt_times_keep_their_trees_below_the_bytes_they_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two players reach a score 3 ms apart: their tree is a level and its root, not nine levels."""
    monkeypatch.setattr(ties, "TIE_TREE_FROM", 2)
    store = MemoryTies()
    store.apply({"a": (5, -BASE - 10), "b": (5, -BASE - 13)})
    assert {level for (_, level, _), count in store.rows.items() if count} == {0, ROOT_LEVEL}
    store.apply({"c": (5, INT64_MAX)})  # a tiebreak of the other sign: the tree keeps every level
    assert tie_tops(store, "b", [5]) == ({}, {})  # type: ignore[arg-type]
    assert {level for (_, level, _), count in store.rows.items() if count} == set(range(TIE_TREE.top + 1))


def test_a_tie_tree_is_built_with_the_highest_floor_whose_nodes_have_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree built whole gets as its floor the highest level below its root whose nodes each hold
    fewer than TIE_TREE_FROM / FLOOR_ROOM players: not one whose nodes are that full, nor a lower one
    (a row a level more for every player that joins or leaves)."""
    monkeypatch.setattr(ties, "TIE_TREE_FROM", 64)
    monkeypatch.setattr(ties, "FLOOR_ROOM", 4)
    store = MemoryTies()
    # 64 players each, root at level 3: score 1 in 4 nodes of level 2 holding 16 (16 * 4 is no
    # room: its floor is level 1), score 2 in 8 nodes of 8 (room: its floor is level 2)
    store.apply({**{f"a{k}.{j}": (1, (k << 16) + (j << 8)) for k in range(4) for j in range(16)},
                 **{f"b{k}.{j}": (2, (k << 16) + (j << 8)) for k in range(8) for j in range(8)}})
    assert tie_tops(store, "b", [1, 2]) == ({1: (3, 0), 2: (3, 0)}, {1: 1, 2: 2})  # type: ignore[arg-type]
    kept = {score: {level for (s, level, _), count in store.rows.items() if s == score and count and level < ROOT_LEVEL}
            for score in (1, 2)}
    assert kept == {1: {1, 2}, 2: {2}}
