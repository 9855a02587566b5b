"""Capture for scores: one object or a batch of up to 500, one log record per board."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import ConfigDict, Field, ValidationError, with_config
from typing_extensions import TypedDict

from pipeline.idempotency import body_hash, new_event_id, per_scope
from pipeline.topics import SCORES, publish
from ports import BoardSettings, EventLog, OutgoingRecord, SpillStore
from ports.errors import InvalidField
from ports.timeutil import Time, now_ms, to_rfc3339
from ranking.model import PlayerRef, Score, ScoreEnvelope, scores_json
from ranking.seasons import season_start


def capture_scores(log: EventLog, spill: SpillStore, scores: Sequence[Score], *,
                   idempotency_key: str | None = None) -> int:
    received = now_ms()
    records = [
        OutgoingRecord(value=ScoreEnvelope(eventId=s.event_id, receivedAt=received, scores=s.items,
                                           bodyHash=s.body_hash).model_dump_json(exclude_none=True).encode(),
                       key=s.scope.encode())
        for s in per_scope("scores", scores, lambda score: score.board, idempotency_key, scores_json)
    ]
    if records:
        publish(log, spill, SCORES, records)
    return len(scores)


@with_config(ConfigDict(extra="forbid"))
class Removal(TypedDict):
    board: str
    playerId: str
    season: Annotated[Time | None, Field(description="the season it is deleted from; null: a board that never resets")]


def capture_removal(log: EventLog, spill: SpillStore, settings: BoardSettings, player_id: str, *,
                    idempotency_key: str | None = None) -> Removal:
    """Asks the board's worker to delete the player's record from the season current now, in order
    with the board's updates (its partition): an update received later makes a new record. A retry
    with the same Idempotency-Key is the same event, applied once (it would delete that record);
    the key reused on the board for another player is set aside, as for scores (rule 9 of docs/architecture.md)."""
    try:
        player = PlayerRef(board=settings.board, playerId=player_id)
    except ValidationError as error:
        raise InvalidField(f"playerId {error.errors()[0]['msg']}", "playerId") from None
    received = now_ms()
    # scoped by the board, as scores are: the key reused for another player is another body
    event_id = new_event_id(f"remove\x00{settings.board}", idempotency_key)
    removal = ScoreEnvelope(eventId=event_id, receivedAt=received, scores=[], removed=[player],
                            bodyHash=body_hash(event_id, player.model_dump_json().encode()))
    publish(log, spill, SCORES, [OutgoingRecord(value=removal.model_dump_json().encode(), key=settings.board.encode())])
    start = season_start(settings.reset, received, settings.epochs)
    return {"board": settings.board, "playerId": player_id, "season": None if start is None else to_rfc3339(start)}
