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
from ranking.ties import Key, combine_key, tie_changes, tiebreak
from ranking.tree import Tree

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
    # (board, player, the update's value or None: the record removed, its subscore, its metadata as
    # JSON text), in the order they apply
    scores: list[tuple[str, str, int | None, int | None, str | None]]


def _event(value: bytes) -> _Event:
    # plain tuples: thousands of live pydantic objects per batch slowed the worker (GC)
    envelope = ScoreEnvelope.model_validate_json(value)
    changes: list[tuple[str, str, int | None, int | None, str | None]] = [
        (s.board, s.playerId, s.score, s.subscore, None if s.metadata is None else metadata_text(s.metadata))
        for s in envelope.scores]
    changes += [(r.board, r.playerId, None, None, None) for r in envelope.removed]
    return _Event(envelope.eventId, envelope.bodyHash, envelope.receivedAt, changes)


# a record's metadata left as it is (None clears it)
_KEPT = object()
# an update's value, the tiebreak it brings (ranking.ties) and its metadata; value None: removed
Change = tuple[int | None, int, str | None]


def _fold(settings: BoardSettings, current: Key | None, changes: Sequence[Change]) -> tuple[Key | None, object]:
    """A record's key after these changes in order (None: no record), and its metadata: a new
    record starts without; an update that set the score brings its own (for best, one at least as
    good); _KEPT when nothing changed it."""
    latest, metadata = current, _KEPT
    for value, brings, carried in changes:
        if value is None:
            latest, metadata = None, None
            continue
        combined = combine_key(settings, latest, value, brings)
        if latest is None:
            metadata = None
        took = combined == (value, brings) if settings.ties == "subscore" else combined[0] == value
        if carried is not None and (settings.operator in ("incr", "decr") or took):
            metadata = carried
        latest = combined
    return latest, metadata


def _aggregate(events: Sequence[_Event], store: RankingStore, tree: Tree) -> list[BoardUpdate]:
    settings: dict[str, BoardSettings] = {}
    # (board, season start) → player → the changes in log order
    pending: dict[tuple[str, int | None], dict[str, list[Change]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        for board, player, value, subscore, carried in event.scores:
            if board not in settings:
                settings[board] = store.get_board(board) or BoardSettings(board)
            board_settings = settings[board]
            season = season_start(board_settings.reset, event.receivedAt, board_settings.epochs)
            brings = tiebreak(board_settings.ties, board_settings.order, event.receivedAt, subscore)
            pending[board, season][player].append((value, brings, carried))
    updates = []
    for (board, season), players in pending.items():
        key = season_key(board, season)
        current = {player: (e.score, e.tiebreak) for player, e in store.records(key, list(players)).items()}
        moves: dict[str, tuple[Key | None, Key | None]] = {}
        metadata: dict[str, str | None] = {}
        for player, changes in players.items():
            was = current.get(player)
            latest, kept = _fold(settings[board], was, changes)
            if latest != was:
                moves[player] = (was, latest)
            if latest is not None and kept is not _KEPT and (kept is not None or was is not None):
                metadata[player] = kept if isinstance(kept, str) else None
        scores = {player: new[0] for player, (_, new) in moves.items() if new is not None}
        tiebreaks = {player: new[1] for player, (_, new) in moves.items() if new is not None and new[1]}
        deltas = tree.deltas([(None if old is None else old[0], None if new is None else new[0])
                              for old, new in moves.values()])
        removed = [player for player, (_, new) in moves.items() if new is None]
        tie_deltas, cleared = ({}, []) if settings[board].ties == "shared" else tie_changes(store, key, moves)
        updates.append(BoardUpdate(settings[board], scores, deltas, key, season, removed, metadata, tiebreaks,
                                   tie_deltas, cleared))
    return updates
