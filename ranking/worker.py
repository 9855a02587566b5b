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
from ranking.model import ScoreEnvelope, metadata_text
from ranking.seasons import season_key, season_start
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
    receivedAt: int
    # (board, player, the update's value or None: the record removed, its metadata as JSON text), in
    # the order they apply
    scores: list[tuple[str, str, int | None, str | None]]


def _event(value: bytes) -> _Event:
    # plain tuples: thousands of live pydantic objects per batch slowed the worker (GC)
    envelope = ScoreEnvelope.model_validate_json(value)
    changes: list[tuple[str, str, int | None, str | None]] = [
        (s.board, s.playerId, s.score, None if s.metadata is None else metadata_text(s.metadata))
        for s in envelope.scores]
    changes += [(r.board, r.playerId, None, None) for r in envelope.removed]
    return _Event(envelope.eventId, envelope.bodyHash, envelope.receivedAt, changes)


# a record's metadata left as it is (None clears it)
_KEPT = object()
Change = tuple[int | None, str | None]


def _fold(settings: BoardSettings, current: int | None, changes: Sequence[Change]) -> tuple[int | None, object]:
    """A record after these changes in order (None: no record), and its metadata: a new record
    starts without; an update that set the score brings its own (for best, one at least as good);
    _KEPT when nothing changed it."""
    latest, metadata = current, _KEPT
    for value, carried in changes:
        if value is None:
            latest, metadata = None, None
            continue
        combined = combine(settings.operator, settings.order, latest, value)
        if latest is None:
            metadata = None
        if carried is not None and (settings.operator in ("incr", "decr") or combined == value):
            metadata = carried
        latest = combined
    return latest, metadata


def _aggregate(events: Sequence[_Event], store: RankingStore, tree: Tree) -> list[BoardUpdate]:
    settings: dict[str, BoardSettings] = {}
    # (board, season start) → player → the changes in log order (value None: removed)
    pending: dict[tuple[str, int | None], dict[str, list[Change]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        for board, player, value, carried in event.scores:
            if board not in settings:
                settings[board] = store.get_board(board) or BoardSettings(board)
            season = season_start(settings[board].reset, event.receivedAt, settings[board].epochs)
            pending[board, season][player].append((value, carried))
    updates = []
    for (board, season), players in pending.items():
        key = season_key(board, season)
        current = store.scores(key, list(players))
        scores: dict[str, int] = {}
        removed: list[str] = []
        metadata: dict[str, str | None] = {}
        for player, changes in players.items():
            latest, kept = _fold(settings[board], current.get(player), changes)
            if latest is None:
                if player in current:
                    removed.append(player)
                continue
            if latest != current.get(player):
                scores[player] = latest
            if kept is not _KEPT and (kept is not None or player in current):
                metadata[player] = kept if isinstance(kept, str) else None
        moves = [(current.get(player), score) for player, score in scores.items()]
        deltas = tree.deltas([*moves, *((current[player], None) for player in removed)])
        updates.append(BoardUpdate(settings[board], scores, deltas, key, season, removed, metadata))
    return updates
