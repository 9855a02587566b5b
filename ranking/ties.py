"""How players with the same score rank: a board's `ties`.

- `shared` (the default): they share a rank (1, 2, 2, 4), listed by playerId.
- `earliest`: whoever reached the score first ranks higher (by the time capture received the update
  that set it); the same millisecond, by playerId.
- `subscore`: a second score breaks the tie, sorted the way the board sorts (then playerId).

A record's key is (score, tiebreak), both compared the way the board sorts: the tiebreak is the
subscore, or the receipt time negated on a desc board (earlier is greater there) and as it is on
an asc one; 0 on a shared board. In the latter two modes every player has a rank of its own:
1 + the players with a better score (the ranking tree) + those of the same score with a better
tiebreak + those of the same score and tiebreak with a smaller playerId.

The middle term is a *tie tree* per score: the ranking tree's arithmetic (ranking.tree) over the
tiebreaks of that score's players, kept only while TIE_TREE_FROM or more share the score. Fewer
are counted from the records' (board, score, tiebreak) index, TIE_TREE_FROM entries at most, where
a tree would cost a row a level for each player that joins or leaves it. A board of scattered
scores, or of small ties, then writes no more rows than a shared one, and a board of large ties
pays for them alone; a rank reads a bounded number of rows either way.

A tie tree keeps only the levels below its *root*: the lowest node over all of its tiebreaks
(receipt times share their top bytes for decades, subscores often all but their lowest), stored
as a row of its own at ROOT_LEVEL (prefix: the root's, count: its level + 1). Above the root
every level holds one node on every member's path, which a rank never sums, so a member's rank is
read as before; a tiebreak outside the root is better or worse than all of the tree at once. A
tiebreak that joins outside it raises the root, writing the levels between once; a tree without
a root row keeps every level (those written before roots were)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from ports import BoardSettings, Order, RankingStore, Ties
from ports.limits import INT64_MAX, INT64_MIN
from ranking.tree import Tree, better, combine

Key = tuple[int, int]
# a tie tree's shape: B = 256, 9 levels, where a score's tree costs a row a level for each player
# that joins or leaves it (the updates of a board of large ties write mostly tie trees); a rank
# reads at most 255 nodes a level of it
TIE_TREE = Tree(bits=8)
# players a score holds from which they are counted by its tie tree; fewer are counted from the
# index (that many entries read at most) and write no tree rows, which most of a crowded board's
# ties would. Raising it leaves the trees of fewer players unread, to be cleared once their score
# holds this many again; lowering it (or going back to a release that kept trees from two players)
# needs those trees built
TIE_TREE_FROM = 64
# the level above the tree's top: where a tie tree's root is kept (see above), and the level of the
# root of a tree that keeps every level
ROOT_LEVEL = TIE_TREE.top + 1
Root = tuple[int, int]


def tiebreak(ties: Ties, order: Order, received_at: int, subscore: int | None) -> int:
    """The tiebreak an update brings."""
    if ties == "subscore":
        return subscore or 0
    if ties == "earliest":
        return -received_at if order == "desc" else received_at
    return 0


def best_tiebreak(order: Order) -> int:
    """A tiebreak no other beats: a position before every player of a score."""
    return INT64_MAX if order == "desc" else INT64_MIN


def _saturated(total: int) -> int:
    return max(INT64_MIN, min(INT64_MAX, total))


def combine_key(settings: BoardSettings, old: Key | None, value: int, brings: int) -> Key:
    """A record's key after one update that brings `value` and the tiebreak `brings`. With a
    subscore the pair is the score (best keeps the better pair; incr and decr move both); else
    the score combines alone and its tiebreak stays while the score does."""
    ties, operator, order = settings.ties, settings.operator, settings.order
    if ties == "subscore":
        if operator in ("incr", "decr"):  # from (0, 0), as a score counts from 0
            sign = 1 if operator == "incr" else -1
            score, second = old or (0, 0)
            return _saturated(score + sign * value), _saturated(second + sign * brings)
        if old is None or operator == "set":
            return value, brings
        return (value, brings) if key_better(order, (value, brings), old) else old
    score = combine(operator, order, None if old is None else old[0], value)
    if old is not None and score == old[0]:
        return old
    return score, brings


def key_better(order: Order, a: Key, b: Key) -> bool:
    return better(order, a[0], b[0]) or (a[0] == b[0] and better(order, a[1], b[1]))


TieDeltas = dict[tuple[int, int, int], int]


def treed(players: int) -> bool:
    """Whether a score's players are counted by its tie tree."""
    return players >= TIE_TREE_FROM


def tie_changes(store: RankingStore, board: str,
                moves: Mapping[str, tuple[Key | None, Key | None]]) -> tuple[TieDeltas, list[int]]:
    """The tie trees' count changes for players moving between keys (None: no record), and the
    scores whose tie tree goes; a score that comes to hold TIE_TREE_FROM players gets its tree
    whole (the players there before included), in place of any rows a tree of it left."""
    leaving: dict[int, list[tuple[str, int]]] = defaultdict(list)
    joining: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for player, (old, new) in moves.items():
        if old is not None:
            leaving[old[0]].append((player, old[1]))
        if new is not None:
            joining[new[0]].append((player, new[1]))
    touched = sorted(leaving.keys() | joining.keys())
    before = store.leaves(board, touched)
    after = {s: before.get(s, 0) - len(leaving[s]) + len(joining[s]) for s in touched}
    grown = [s for s in touched if before.get(s, 0) and not treed(before[s]) and treed(after[s])]
    there: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for entry in store.at_scores(board, grown):
        there[entry.score].append((entry.player_id, entry.tiebreak))
    roots = tie_roots(store, board, [s for s in touched if treed(before.get(s, 0)) and treed(after[s])])
    found: TieDeltas = defaultdict(int)
    cleared = []
    for s in touched:
        had, has = treed(before.get(s, 0)), treed(after[s])
        if had and has:
            moved = [(t, None) for _, t in leaving[s]] + [(None, t) for _, t in joining[s]]
            _grow(found, s, moved, root=roots.get(s), joining=[t for _, t in joining[s]], members=before[s])
        elif had or has:
            cleared.append(s)
        if has and not had:
            gone = {p for p, _ in leaving[s]}
            members = [t for _, t in joining[s]] + [t for p, t in there[s] if p not in gone]
            _grow(found, s, [(None, t) for t in members], root=None, joining=members, members=0)
    return {node: delta for node, delta in found.items() if delta}, cleared


def tie_roots(store: RankingStore, board: str, scores: list[int]) -> dict[int, Root]:
    """The roots of these scores' tie trees, as (level, prefix); none for a tree that keeps every level."""
    found = store.tie_nodes_at(board, scores, ROOT_LEVEL)
    return {score: (count - 1, prefix) for score, (prefix, count) in found.items()}


def _grow(found: TieDeltas, score: int, moved: Sequence[tuple[int | None, int | None]], *, root: Root | None,
          joining: list[int], members: int) -> None:
    """Adds to `found` a tie tree's changes: its `members` before under `root` (None: a tree of
    every level; a new tree has none and no root), raised to take the `joining` tiebreaks."""
    level, prefix = root if root is not None else (ROOT_LEVEL, 0)
    if not members:  # a new tree: rooted over its first members
        level, prefix = 0, joining[0]
    raised = level
    while raised < ROOT_LEVEL and any(TIE_TREE.prefix(t, raised) != prefix >> (TIE_TREE.bits * (raised - level))
                                  for t in joining):
        raised += 1
    for between in range(level, raised):  # the members before, under the levels now kept
        found[score, between, prefix >> (TIE_TREE.bits * (between - level))] += members
    for (node_level, node), delta in TIE_TREE.deltas(moved).items():
        if node_level < raised:
            found[score, node_level, node] += delta
    if root is not None and raised != level:
        found[score, ROOT_LEVEL, prefix] -= level + 1
    if raised < ROOT_LEVEL and (root is None or raised != level):
        found[score, ROOT_LEVEL, prefix >> (TIE_TREE.bits * (raised - level))] += raised + 1
