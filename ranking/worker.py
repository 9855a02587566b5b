"""The ranking worker's "job aggregation" (the case study): a whole batch from the `scores` topic
is coalesced per board and player, current scores are read once, node deltas computed, and scores,
deltas and the partition's offset written in ONE transaction. The topic is keyed by board, so a
board is only ever written by the worker of its partition: no contention, no retries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from pipeline.failures import land_per_partition
from pipeline.offsets import fresh_by_partition, pass_over
from pipeline.topics import parse_each
from ports import BoardSettings, BoardUpdate, EventLog, LogRecord, RankingStore
from ranking.model import ScoreEnvelope
from ranking.tree import Tree, combine

CONSUMER = "ranking-worker"


def apply_scores(records: Sequence[LogRecord], store: RankingStore, log: EventLog, tree: Tree) -> int:
    """Returns how many score updates were applied (redelivered and retried ones are skipped); a
    record whose value no store takes goes to the dead letters alone (DESIGN §3.8)."""
    return sum(land_per_partition(
        records, lambda part: _apply(part, store, log, tree), log,
        lambda record: pass_over(record, store, CONSUMER, log, lambda checkpoint: store.apply(checkpoint, [])),
    ))


def _apply(records: Sequence[LogRecord], store: RankingStore, log: EventLog, tree: Tree) -> int:
    applied = 0
    for part in fresh_by_partition(records, store, CONSUMER, log):
        events = parse_each(part.records, _event, "score")
        fresh = part.unseen(store, CONSUMER, events)
        store.apply(part.checkpoint(CONSUMER, fresh), _aggregate(fresh, store, tree))
        applied += sum(len(e.scores) for e in fresh)
    return applied


class _Event(NamedTuple):
    eventId: str
    bodyHash: str | None
    scores: list[tuple[str, str, int]]


def _event(value: bytes) -> _Event:
    # plain tuples: thousands of live pydantic objects per batch slowed the worker (GC)
    envelope = ScoreEnvelope.model_validate_json(value)
    return _Event(envelope.eventId, envelope.bodyHash, [(s.board, s.playerId, s.score) for s in envelope.scores])


def _aggregate(events: Sequence[_Event], store: RankingStore, tree: Tree) -> list[BoardUpdate]:
    # board → player → the values in log order
    pending: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        for board, player, value in event.scores:
            pending[board][player].append(value)
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
    return updates
