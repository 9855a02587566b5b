"""The brute-force leaderboard the ranking tests compare against: a dict of scores."""

from __future__ import annotations

from typing import Any

from ranking.tree import better, combine


class BruteBoard:
    def __init__(self, order: str, operator: str) -> None:
        self.order, self.operator = order, operator
        self.scores: dict[str, int] = {}

    def apply(self, player: str, value: int) -> None:
        self.scores[player] = combine(self.operator, self.order, self.scores.get(player), value)

    def rank(self, score: int) -> int:
        return 1 + sum(1 for s in self.scores.values() if better(self.order, s, score))

    def ordered(self) -> list[dict[str, Any]]:
        """Best first, ties by playerId ascending, with ranks (1, 2, 2, 4)."""
        items = sorted(self.scores.items(), key=lambda kv: (-kv[1] if self.order == "desc" else kv[1], kv[0]))
        return [{"rank": self.rank(s), "playerId": p, "score": s} for p, s in items]

    def remove(self, player: str) -> None:
        self.scores.pop(player, None)
