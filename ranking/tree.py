"""The ranking tree of docs/architecture.md, as arithmetic on scores: no storage here.

A board's tree covers the whole signed 64-bit range with branching factor B = 2**bits. A level is
named by its shift in `unit` bits: the node at (level, prefix) counts the players whose score s has
s >> (unit * level) == prefix, and a node's parent is `step` = bits / unit levels up. An arithmetic
shift keeps order for negative scores too, prefixes of one level never overflow 64 bits, and a
node's children are (level - step, prefix * B + d) for d in 0..B-1. At the top level the prefixes
are -1 (negative scores) and 0 (the rest).

rank(score) = 1 + the players strictly better, which are exactly the nodes, one level at a time,
that share the score's parent but lie on its better side: at most B - 1 nodes per level, so
O(B * log_B(range)) rows whatever the number of players."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ports import NodeRange, Operator, Order
from ports.limits import INT64_MAX, INT64_MIN


@dataclass(frozen=True)
class Tree:
    bits: int = 4
    # the bits a level's number stands for (None: bits): a tree of 8 bits in units of 4 numbers its
    # levels 0, 2, ..., 16, which are the nodes of the tree of 4 bits at those levels
    unit: int | None = None

    def __post_init__(self) -> None:
        if self.bits % self._unit:
            raise ValueError(f"a tree of {self.bits} bits cannot number its levels in units of {self.unit}")

    @property
    def branching(self) -> int:
        return 1 << self.bits

    @property
    def _unit(self) -> int:
        return self.unit or self.bits

    @property
    def step(self) -> int:
        """Level numbers from a node to its parent."""
        return self.bits // self._unit

    @property
    def top(self) -> int:
        """The level whose prefixes are only -1 and 0."""
        return math.ceil(64 / self.bits) * self.step

    @cached_property
    def levels(self) -> tuple[int, ...]:
        """Leaf to top."""
        return tuple(range(0, self.top + 1, self.step))

    def prefix(self, score: int, level: int) -> int:
        return score >> (self._unit * level)

    @cached_property
    def _shifts(self) -> tuple[tuple[int, int], ...]:
        return tuple((level, self._unit * level) for level in self.levels)

    def path(self, score: int) -> list[tuple[int, int]]:
        """Every node that counts a player with this score, leaf to top."""
        return [(level, score >> shift) for level, shift in self._shifts]

    def better_ranges(self, score: int, order: Order) -> list[NodeRange]:
        """The nodes whose counts add up to the players strictly better than `score`."""
        ranges = []
        for level in self.levels[:-1]:
            mine = self.prefix(score, level)
            first = (mine >> self.bits) << self.bits
            last = first + self.branching - 1
            if order == "desc" and mine < last:
                ranges.append(NodeRange(level, mine + 1, last))
            elif order == "asc" and mine > first:
                ranges.append(NodeRange(level, first, mine - 1))
        mine = self.prefix(score, self.top)
        if order == "desc" and mine < 0:
            ranges.append(NodeRange(self.top, 0, 0))
        elif order == "asc" and mine == 0:
            ranges.append(NodeRange(self.top, -1, -1))
        return ranges

    def children(self, level: int, prefix: int) -> NodeRange:
        first = prefix << self.bits
        return NodeRange(level - self.step, first, first + self.branching - 1)

    def top_range(self) -> NodeRange:
        return NodeRange(self.top, -1, 0)

    def deltas(self, moves: Iterable[tuple[int | None, int | None]]) -> dict[tuple[int, int], int]:
        """Node count changes for players moving from an old score to a new one (None: absent);
        nodes whose changes cancel out are left out, so nothing is written for them."""
        # level by level, each from the one below (a node's change is the sum of its children's):
        # the distinct prefixes shrink going up and cancelled ones drop out, where a path a player
        # would cost a node at every level (the worker's hot path)
        below: dict[int, int] = {}
        for old, new in moves:
            if old != new:
                if old is not None:
                    below[old] = below.get(old, 0) - 1
                if new is not None:
                    below[new] = below.get(new, 0) + 1
        found: dict[tuple[int, int], int] = {}
        bits = self.bits
        for level in self.levels:
            above: dict[int, int] = {}
            for prefix, delta in below.items():
                if delta:
                    found[level, prefix] = delta
                    above[prefix >> bits] = above.get(prefix >> bits, 0) + delta
            below = above
        return found


# the deployment's tree: B = 256, 9 levels. A batch's moves write some 0.55 of the node rows of
# B = 16's 17 levels, and a rank seeks 8 ranges for 16 (up to 255 nodes each, for 15). Its levels
# are numbered as B = 16 numbered them, whose even levels they are: no node was rebuilt, and a
# worker of either writes the other's right. Only a release of B = 16 reads the odd levels, stale
# since: during a deployment its readers answer right only before the new workers start (readers
# first), and going back to it runs adapters/sql/rollback/ranking_tree_of_16.sql first. Another
# shape needs the node counts rebuilt.
DEFAULT_TREE = Tree(bits=8, unit=4)


def better(order: Order, a: int, b: int) -> bool:
    return a > b if order == "desc" else a < b


def best_first(order: Order, prefixes: Iterable[int]) -> list[int]:
    return sorted(prefixes, reverse=order == "desc")


def combine(operator: Operator, order: Order, old: int | None, value: int) -> int:
    """A player's score after one update; incr and decr count from 0 and saturate at the int64
    bounds rather than wrapping."""
    if operator in ("incr", "decr"):
        total = (old or 0) + (value if operator == "incr" else -value)
        return max(INT64_MIN, min(INT64_MAX, total))
    if operator == "set" or old is None:
        return value
    return value if better(order, value, old) else old
