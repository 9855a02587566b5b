"""The brute-force leaderboard the ranking tests compare against: a dict of scores."""

from __future__ import annotations

from typing import Any

from ranking.tree import better, combine


class BruteBoard:
    def __init__(self, order: str, operator: str) -> None:
        self.order, self.operator = order, operator
        self.scores: dict[str, int] = {}
        self.metadata: dict[str, Any] = {}

    def apply(self, player: str, value: int, metadata: Any = None) -> None:
        """A new record starts without metadata; an update that set the score brings its own."""
        old = self.scores.get(player)
        new = combine(self.operator, self.order, old, value)
        if old is None:
            self.metadata.pop(player, None)
        if metadata is not None and (self.operator in ("incr", "decr") or new == value):
            self.metadata[player] = metadata
        self.scores[player] = new

    def rank(self, score: int) -> int:
        return 1 + sum(1 for s in self.scores.values() if better(self.order, s, score))

    def ordered(self) -> list[dict[str, Any]]:
        """Best first, ties by playerId ascending, with ranks (1, 2, 2, 4)."""
        items = sorted(self.scores.items(), key=lambda kv: (-kv[1] if self.order == "desc" else kv[1], kv[0]))
        return [{"rank": self.rank(s), "playerId": p, "score": s, "metadata": self.metadata.get(p)} for p, s in items]

    def remove(self, player: str) -> None:
        self.scores.pop(player, None)
        self.metadata.pop(player, None)
