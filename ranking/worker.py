"""The ranking worker's "job aggregation" (the case study): a whole batch from the `scores` topic
is coalesced per board and player, current scores are read once, node deltas computed, and scores,
deltas and the partition's offset written in ONE transaction. The topic is keyed by board, so a
board is only ever written by the worker of its partition: no contention, no retries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import ValidationError

from adapters.ports import BoardSettings, BoardUpdate, EventLog, LogRecord, RankingStore
from core.offsets import fresh_by_partition
from core.topics import dead_letter
from ranking.model import ScoreEnvelope
from ranking.tree import Tree, combine

CONSUMER = "ranking-worker"


def apply_scores(records: Sequence[LogRecord], store: RankingStore, log: EventLog, tree: Tree) -> int:
    """Returns how many score updates were applied (redelivered ones are skipped)."""
    applied = 0
    for part in fresh_by_partition(records, lambda tp: store.applied_offset(CONSUMER, tp)):
        updates, rejected, count = _aggregate(part.records, store, tree)
        dead_letter(log, rejected)
        store.apply(CONSUMER, part.topic_partition, part.applied, part.last, updates)
        applied += count
    return applied


def _aggregate(
    records: Sequence[LogRecord], store: RankingStore, tree: Tree
) -> tuple[list[BoardUpdate], list[tuple[LogRecord, str]], int]:
    # board → player → the values in log order
    pending: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    rejected: list[tuple[LogRecord, str]] = []
    count = 0
    for record in records:
        try:
            envelope = ScoreEnvelope.model_validate_json(record.value)
        except ValidationError as exc:
            rejected.append((record, f"malformed score record: {exc.errors()[0]['msg']}"))
            continue
        for update in envelope.scores:
            pending[update.board][update.playerId].append(update.score)
            count += 1
    updates = []
    for board, players in pending.items():
        settings = store.get_board(board) or BoardSettings(board)
        current = store.scores(board, list(players))
        scores: dict[str, int] = {}
        for player, values in players.items():
            latest = current.get(player)
            for value in values:
                latest = combine(settings.operator, settings.order, latest, value)
            if latest is not None and latest != current.get(player):
                scores[player] = latest
        deltas = tree.deltas((current.get(player), score) for player, score in scores.items())
        updates.append(BoardUpdate(settings, scores, deltas))
    return updates, rejected, count
