"""Capture for scores: one object or a batch of up to 500, one log record per board."""

from __future__ import annotations

from collections import defaultdict

from adapters.ports import EventLog, OutgoingRecord, SpillStore
from core.idempotency import body_hash, new_event_id
from core.requests import Posted, validate_batch
from core.timeutil import now_ms
from core.topics import SCORES, publish
from ranking.model import MAX_BATCH, Score, ScoreEnvelope, scores_json


def capture_scores(log: EventLog, spill: SpillStore, posted: Posted) -> int:
    scores = validate_batch(Score, posted.json(), MAX_BATCH)
    by_board: dict[str, list[Score]] = defaultdict(list)
    for score in scores:
        by_board[score.board].append(score)
    received = now_ms()
    records = []
    for board, board_scores in by_board.items():
        event_id = new_event_id(f"scores\x00{board}", posted.idempotency_key)
        envelope = ScoreEnvelope(eventId=event_id, receivedAt=received, scores=board_scores,
                                 bodyHash=body_hash(event_id, scores_json(board_scores)))
        records.append(OutgoingRecord(value=envelope.model_dump_json().encode(), key=board.encode()))
    if records:
        publish(log, spill, SCORES, records)
    return len(scores)
