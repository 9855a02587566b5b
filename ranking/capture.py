"""Capture for scores: one object or a batch of up to 500, one log record per board."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.idempotency import per_scope
from pipeline.topics import SCORES, publish
from ports import EventLog, OutgoingRecord, SpillStore
from ports.timeutil import now_ms
from ranking.model import Score, ScoreEnvelope, scores_json


def capture_scores(log: EventLog, spill: SpillStore, scores: Sequence[Score], *,
                   idempotency_key: str | None = None) -> int:
    received = now_ms()
    records = [
        OutgoingRecord(value=ScoreEnvelope(eventId=s.event_id, receivedAt=received, scores=s.items,
                                           bodyHash=s.body_hash).model_dump_json().encode(),
                       key=s.scope.encode())
        for s in per_scope("scores", scores, lambda score: score.board, idempotency_key, scores_json)
    ]
    if records:
        publish(log, spill, SCORES, records)
    return len(scores)
