"""Tournaments: a board with a maximum of attempts a player (`maxAttempts`) or of players
(`maxPlayers`) a season takes its scores only as attempts, each decided at once, under the
season's lock, so that no limit is passed by requests that race: the attempt is counted, then its
score is published to the board's worker as capture publishes one (ranking.capture), marked as an
attempt. The worker applies no other score to such a board (ranking.worker).

An attempt sent with an Idempotency-Key is kept by its event id: a retry (the answer lost, or
the publish failed after the attempt was counted) gets the first answer and publishes the score
again, received when the first was (the worker applies an event id once); another body under the
same key is refused. Without a key, every request is a new attempt."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from pipeline.idempotency import body_hash, new_event_id
from pipeline.topics import SCORES, publish
from ports import Attempt, Attempted, BoardSettings, EventLog, OutgoingRecord, SpillStore, TournamentStore
from ports.errors import (
    AttemptsExhausted,
    Conflict,
    IdempotencyConflict,
    NotATournament,
    TournamentClosed,
    TournamentFull,
)
from ports.timeutil import Time, now_ms, to_rfc3339
from ranking.model import MAX_ATTEMPTS, AttemptBody, ScoreEnvelope, scores_json
from ranking.seasons import season_key, season_start


@with_config(ConfigDict(extra="forbid"))
class AttemptReceipt(TypedDict):
    """An attempt counted, its score durable: the board's worker applies it within its delay."""

    board: str
    playerId: str
    season: Annotated[Time | None, Field(description=(
        "the season it counts in; null: a board that never resets nor was wiped"))]
    attempt: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS, description="the player's attempts this season, this one "
                                                                     "included")]
    attemptsLeft: Annotated[int | None, Field(ge=0, description="the player's attempts left; null: unlimited")]


def _refusal(settings: BoardSettings, attempted: Attempted, player: str) -> Conflict | None:
    board = settings.board
    match attempted.outcome:
        case "conflict":
            return IdempotencyConflict(f"this Idempotency-Key was used for another attempt at {board}")
        case "closed":
            return TournamentClosed(f"tournament {board} takes no attempt now (see its startsAt and endsAt)")
        case "exhausted":
            return AttemptsExhausted(f"player {player} made all its attempts at {board} this season "
                                     f"({settings.max_attempts})")
        case "full":
            return TournamentFull(f"tournament {board} has its {settings.max_players} players this season")
    return None


def attempt(store: TournamentStore, log: EventLog, spill: SpillStore, settings: BoardSettings, body: AttemptBody,
            *, idempotency_key: str | None = None) -> AttemptReceipt:
    """One attempt at the tournament board, counted then published (once a request: a retry's
    publish is the same event, which the worker applies once)."""
    board = settings.board
    not_one = NotATournament(f"leaderboard {board} is no tournament: it has neither maxAttempts nor maxPlayers "
                             "(post its scores to /v1/scores)")
    if not settings.tournament and idempotency_key is None:
        raise not_one
    score = body.on(board)
    received = now_ms()
    event_id = new_event_id(f"attempt\x00{board}", idempotency_key)
    digest = body_hash(event_id, scores_json([score]))
    start = season_start(settings.reset, received, settings.epochs)
    # a board whose limits were lifted takes no attempt, but a retry of one it counted is answered
    # (its publish may have failed): closed to all but retries
    attempted = store.attempt(Attempt(season_key(board, start), body.playerId, event_id, digest, received,
                                      settings.tournament and settings.takes(received), settings.max_attempts,
                                      settings.max_players))
    if not settings.tournament and attempted.outcome == "closed":
        raise not_one
    refusal = _refusal(settings, attempted, body.playerId)
    if refusal is not None:
        raise refusal
    # a retry: the season and time of the first, so the worker puts it where the attempt counted
    first = attempted.received_at
    envelope = ScoreEnvelope(eventId=event_id, receivedAt=first, scores=[score], bodyHash=digest, attempt=True)
    publish(log, spill, SCORES, [OutgoingRecord(value=envelope.model_dump_json(exclude_none=True).encode(),
                                                key=board.encode())])
    season = season_start(settings.reset, first, settings.epochs)
    left = None if settings.max_attempts is None else max(settings.max_attempts - attempted.attempt, 0)
    return {"board": board, "playerId": body.playerId, "season": None if season is None else to_rfc3339(season),
            "attempt": attempted.attempt, "attemptsLeft": left}
