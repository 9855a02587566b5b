"""Capture for scores: one object or a batch of up to 500, one log record per board."""

from __future__ import annotations

from collections import defaultdict

from adapters.ports import EventLog, OutgoingRecord, SpillStore
from core.requests import Posted, validate_batch
from core.timeutil import now_ms
from core.topics import SCORES, publish
from crashes.model import new_event_id
from ranking.model import MAX_BATCH, Score, ScoreEnvelope


def capture_scores(log: EventLog, spill: SpillStore, posted: Posted) -> int:
    scores = validate_batch(Score, posted.json(), MAX_BATCH)
    by_board: dict[str, list[Score]] = defaultdict(list)
    for score in scores:
        by_board[score.board].append(score)
    received = now_ms()
    records = [
        OutgoingRecord(
            value=ScoreEnvelope(
                eventId=new_event_id(f"scores\\x00{board}", posted.idempotency_key), receivedAt=received,
                scores=board_scores,
            ).model_dump_json().encode(),
            key=board.encode(),
        )
        for board, board_scores in by_board.items()
    ]
    if records:
        publish(log, spill, SCORES, records)
    return len(scores)
