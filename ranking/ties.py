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
a root row keeps every level (those written before roots were).

Nor does a tie tree keep a level under its *floor* (stored at FLOOR_LEVEL, count: the floor; no
row: 0): when the tree is built, the highest level whose nodes each hold fewer than
TIE_TREE_FROM / FLOOR_ROOM players, and each of them holds fewer than TIE_TREE_FROM since. Within a
node of the floor its players are counted from the index, as a small tie's are, that many entries
at most. A player joining or leaving then writes a row a level from the floor up, not from level 0:
of the four levels below the root of receipt times over a week, a tie of a hundred keeps one. A
floor node that comes to hold TIE_TREE_FROM players has its score's tree built again, with a floor
as low as that takes: that batch reads the tie's players and writes its tree whole, once a level
at most in the tree's life, which a large tie pays for in one batch. A release before floors
neither keeps them nor reads below them: going back to one, or running one beside this, needs
every tie tree with a floor row built again (cleared, and rebuilt from the index) first."""

from __future__ import annotations

from collections import Counter, defaultdict
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
# needs those trees built, and so do the floors' nodes, which may hold up to the old value less one
TIE_TREE_FROM = 64
# the level above the tree's top: where a tie tree's root is kept (see above), and the level of the
# root of a tree that keeps every level
ROOT_LEVEL = TIE_TREE.top + 1
# where a tie tree's floor is kept (see above)
FLOOR_LEVEL = ROOT_LEVEL + 1
# a tree is built with its floor nodes at most 1/FLOOR_ROOM full, so that a tie growing by a few
# players does not fill one and have the tree built again at once
FLOOR_ROOM = 4
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
    scores whose tie tree goes; a score that comes to hold TIE_TREE_FROM players, or a node of its
    floor as many, gets its tree whole (the players there before included), in place of any rows a
    tree of it left."""
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
    kept = [s for s in touched if treed(before.get(s, 0)) and treed(after[s])]
    roots, floors = tie_tops(store, board, kept)
    found: TieDeltas = defaultdict(int)
    for s in kept:
        moved = [(t, None) for _, t in leaving[s]] + [(None, t) for _, t in joining[s]]
        _grow(found, s, moved, root=roots.get(s), joining=[t for _, t in joining[s]], members=before[s],
              floor=floors.get(s, 0))
    filled = _filled(store, board, found, floors, joining)
    for node in [node for node in found if node[0] in filled]:
        del found[node]
    grown = [s for s in touched if before.get(s, 0) and not treed(before[s]) and treed(after[s])]
    there: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for entry in store.at_scores(board, grown + filled):
        there[entry.score].append((entry.player_id, entry.tiebreak))
    cleared = []
    for s in touched:
        had, has = treed(before.get(s, 0)), treed(after[s])
        if had != has or s in filled:
            cleared.append(s)
        if has and (not had or s in filled):
            gone = {p for p, _ in leaving[s]}
            _build(found, s, [t for _, t in joining[s]] + [t for p, t in there[s] if p not in gone])
    return {node: delta for node, delta in found.items() if delta}, cleared


def tie_tops(store: RankingStore, board: str, scores: list[int]) -> tuple[dict[int, Root], dict[int, int]]:
    """The roots of these scores' tie trees, as (level, prefix), and their floors, in one read;
    no root for a tree that keeps every level, no floor for a floor of 0."""
    found = store.tie_nodes_at(board, scores, (ROOT_LEVEL, FLOOR_LEVEL))
    return ({score: (count - 1, prefix) for (score, level), (prefix, count) in found.items() if level == ROOT_LEVEL},
            {score: count for (score, level), (_, count) in found.items() if level == FLOOR_LEVEL})


def floor_span(tiebreak: int, floor: int) -> tuple[int, int]:
    """The first and last tiebreak of the tiebreak's node at the floor (a node of the top level
    holds the tiebreaks of one sign: its span, 2**64 wide, is cut to theirs)."""
    first = TIE_TREE.prefix(tiebreak, floor) << (TIE_TREE.bits * floor)
    return max(INT64_MIN, first), min(INT64_MAX, first + (1 << (TIE_TREE.bits * floor)) - 1)


def _filled(store: RankingStore, board: str, found: TieDeltas, floors: Mapping[int, int],
            joining: Mapping[int, list[tuple[str, int]]]) -> list[int]:
    """The scores a node of whose floor (above level 0) holds TIE_TREE_FROM players after `found`."""
    nodes = sorted({(s, floor, TIE_TREE.prefix(t, floor)) for s, floor in floors.items() for _, t in joining[s]})
    counts = store.tie_counts(board, nodes)
    return sorted({node[0] for node in nodes if treed(counts.get(node, 0) + found.get(node, 0))})


def _build(found: TieDeltas, score: int, members: list[int]) -> None:
    """Adds to `found` the tree of these tiebreaks, from its floor to its root."""
    root = 0
    while root < ROOT_LEVEL and len({TIE_TREE.prefix(t, root) for t in members}) > 1:
        root += 1
    floor = next((level for level in range(root - 1, 0, -1)
                  if not treed(FLOOR_ROOM * max(Counter(TIE_TREE.prefix(t, level) for t in members).values()))), 0)
    for t in members:
        for level in range(floor, root):
            found[score, level, TIE_TREE.prefix(t, level)] += 1
    if root < ROOT_LEVEL:
        found[score, ROOT_LEVEL, TIE_TREE.prefix(members[0], root)] += root + 1
    if floor:
        found[score, FLOOR_LEVEL, 0] += floor


def _grow(found: TieDeltas, score: int, moved: Sequence[tuple[int | None, int | None]], *, root: Root | None,
          joining: list[int], members: int, floor: int) -> None:
    """Adds to `found` a tie tree's changes: its `members` before under `root` (None: a tree of
    every level), raised to take the `joining` tiebreaks, and kept from its `floor` up."""
    level, prefix = root if root is not None else (ROOT_LEVEL, 0)
    raised = level
    while raised < ROOT_LEVEL and any(TIE_TREE.prefix(t, raised) != prefix >> (TIE_TREE.bits * (raised - level))
                                  for t in joining):
        raised += 1
    for between in range(level, raised):  # the members before, under the levels now kept
        found[score, between, prefix >> (TIE_TREE.bits * (between - level))] += members
    for (node_level, node), delta in TIE_TREE.deltas(moved).items():
        if floor <= node_level < raised:
            found[score, node_level, node] += delta
    if root is not None and raised != level:
        found[score, ROOT_LEVEL, prefix] -= level + 1
    if raised < ROOT_LEVEL and (root is None or raised != level):
        found[score, ROOT_LEVEL, prefix >> (TIE_TREE.bits * (raised - level))] += raised + 1
