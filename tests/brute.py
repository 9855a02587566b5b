"""The brute-force leaderboard the ranking tests compare against: a dict of scores."""

from __future__ import annotations

from typing import Any

from ports.limits import INT64_MAX, INT64_MIN
from ranking.tree import better, combine


def _saturated(total: int) -> int:
    return max(INT64_MIN, min(INT64_MAX, total))


class BruteBoard:
    def __init__(self, order: str, operator: str, ties: str = "shared") -> None:
        self.order, self.operator, self.ties = order, operator, ties
        self.scores: dict[str, int] = {}
        self.metadata: dict[str, Any] = {}
        # earliest: when the score was reached; subscore: the subscore
        self.second: dict[str, int] = {}
        # players whose records are hidden (ranking.bans): they keep taking updates
        self.banned: set[str] = set()

    def apply(self, player: str, value: int, metadata: Any = None, *, at: int = 0, subscore: int | None = None) -> None:
        """A new record starts without metadata; an update that set the score brings its own."""
        old = self.scores.get(player)
        sub = subscore or 0
        if self.ties == "subscore":
            pair = (value, sub)
            if self.operator in ("incr", "decr"):  # from (0, 0), the first update too
                sign = 1 if self.operator == "incr" else -1
                second = 0 if old is None else self.second[player]
                pair = (_saturated((old or 0) + sign * value), _saturated(second + sign * sub))
            elif old is not None and self.operator == "best" and not self._pair_better((value, sub), player):
                pair = (old, self.second[player])
            new, took = pair[0], pair == (value, sub)
            self.second[player] = pair[1]
        else:
            new = combine(self.operator, self.order, old, value)
            took = new == value
            if new != old:
                self.second[player] = at
        if old is None:
            self.metadata.pop(player, None)
        if metadata is not None and (self.operator in ("incr", "decr") or took):
            self.metadata[player] = metadata
        self.scores[player] = new

    def _pair_better(self, pair: tuple[int, int], player: str) -> bool:
        score, sub = self.scores[player], self.second[player]
        return better(self.order, pair[0], score) or (pair[0] == score and better(self.order, pair[1], sub))

    def _sort_key(self, player: str) -> tuple[int, int, str]:
        sign = -1 if self.order == "desc" else 1
        score = self.scores[player]
        if self.ties == "earliest":
            return sign * score, self.second[player], player
        if self.ties == "subscore":
            return sign * score, sign * self.second[player], player
        return sign * score, 0, player

    def rank(self, score: int, subscore: int | None = None) -> int:
        """The rank a record of this score would have (reached now, or with this subscore)."""
        shown = {p: s for p, s in self.scores.items() if p not in self.banned}
        strictly = sum(1 for s in shown.values() if better(self.order, s, score))
        if self.ties == "shared":
            return 1 + strictly
        level = [p for p, s in shown.items() if s == score]
        if self.ties == "subscore" and subscore is not None:
            level = [p for p in level if not better(self.order, subscore, self.second[p])]
        return 1 + strictly + len(level)

    def ordered(self) -> list[dict[str, Any]]:
        """Best first, ties by playerId ascending (or by the board's ties), with ranks (1, 2, 2, 4)
        or, where ties do not share one, 1, 2, 3, 4."""
        players = sorted((p for p in self.scores if p not in self.banned), key=self._sort_key)
        return [{"rank": self.rank(self.scores[p]) if self.ties == "shared" else position, "playerId": p,
                 "score": self.scores[p], "metadata": self.metadata.get(p),
                 **({"subscore": self.second[p]} if self.ties == "subscore" else {})}
                for position, p in enumerate(players, start=1)]

    def remove(self, player: str) -> None:
        self.scores.pop(player, None)
        self.metadata.pop(player, None)
        self.second.pop(player, None)
