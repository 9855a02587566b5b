"""Scores and board settings as the API takes them, and as carried on the `scores` topic."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, TypeAdapter

from ports import Operator, Order
from ports.limits import Int64, PathSegment

MAX_BATCH = 500
NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
PlayerId = PathSegment


class Score(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    board: Name
    playerId: PlayerId
    score: Int64


class ScoreEnvelope(BaseModel):
    """One record per board of a request, keyed by board, so a board's updates stay in order in
    one partition and only that partition's worker writes the board."""

    model_config = ConfigDict(strict=True)

    eventId: str
    receivedAt: int
    scores: list[Score]
    bodyHash: str | None = None


_SCORES = TypeAdapter(list[Score])


def scores_json(scores: list[Score]) -> bytes:
    """What a score record carries, as the text its body hash is taken of."""
    return _SCORES.dump_json(scores)


class BoardSettingsBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    order: Order = "desc"
    operator: Operator = "best"
