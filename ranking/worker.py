"""The ranking worker's "job aggregation" (the case study): a whole batch from the `scores` topic
is coalesced per board and player, current scores are read once, node deltas computed, and scores,
deltas and the partition's offset written in ONE transaction. The topic is keyed by board, so a
board is only ever written by the worker of its partition: no contention, no retries."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from pipeline.failures import land_per_partition
from pipeline.offsets import fresh_by_partition, pass_over
from pipeline.topics import Refused, parse_each
from ports import BoardSettings, BoardUpdate, EventLog, LogRecord, RankingStore
from ports.threads import kept_pool
from ports.timeutil import to_rfc3339
from ranking.model import SCORE_RECORD, metadata_text
from ranking.seasons import forgotten_before, season_key, season_start
from ranking.ties import Key, combine_key, tie_changes, tiebreak
from ranking.tree import Tree

CONSUMER = "ranking-worker"


def apply_scores(records: Sequence[LogRecord], store: RankingStore, log: EventLog, tree: Tree) -> int:
    """Returns how many score updates were applied (redelivered and retried ones are skipped); a
    record whose value no store takes goes to the dead letters alone (rule 8 of docs/architecture.md)."""
    return sum(land_per_partition(
        records, lambda part: _apply(part, store, log, tree), log,
        lambda record: pass_over(record, store, CONSUMER, log, lambda checkpoint: store.apply(checkpoint, [])),
    ))


def _apply(records: Sequence[LogRecord], store: RankingStore, log: EventLog, tree: Tree) -> int:
    applied = 0
    for part in fresh_by_partition(records, store, CONSUMER, log):
        events = parse_each(part.records, _event, "score")
        fresh = part.unseen(store, CONSUMER, events)
        updates, taken = _aggregate(fresh, store, tree)
        store.apply(part.checkpoint(CONSUMER, fresh), updates)
        applied += taken
    return applied


class _Event(NamedTuple):
    eventId: str
    bodyHash: str | None
    receivedAt: int
    # (board, player, the update's value or None: the record removed, its subscore, its metadata as
    # JSON text), in the order they apply
    scores: list[tuple[str, str, int | None, int | None, str | None]]
    # (key, player): records to show or hide as the ban list says
    rechecked: list[tuple[str, str]]
    # a tournament's attempt (ranking.tournaments)
    attempt: bool


def _event(value: bytes) -> _Event:
    # plain tuples: thousands of live pydantic objects per batch slowed the worker (GC)
    record = SCORE_RECORD.validate_json(value)
    changes: list[tuple[str, str, int | None, int | None, str | None]] = [
        (s["board"], s["playerId"], s["score"], s.get("subscore"),
         # sorted as the API's Metadata keeps it: a record of a release before that may list it otherwise
         None if (metadata := s.get("metadata")) is None else metadata_text(dict(sorted(metadata.items()))))
        for s in record["scores"]]
    changes += [(r["board"], r["playerId"], None, None, None) for r in record.get("removed", ())]
    return _Event(record["eventId"], record.get("bodyHash"), record["receivedAt"], changes,
                  [(r["key"], r["playerId"]) for r in record.get("rechecked", ())], bool(record.get("attempt")))


def _takes(settings: BoardSettings, event: _Event) -> bool:
    """Whether the board takes the event's scores: received within its window, and on a tournament
    only as attempts (counted against its limits when received)."""
    return settings.takes(event.receivedAt) and (event.attempt or not settings.tournament)


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


def _aggregate(events: Sequence[_Event], store: RankingStore, tree: Tree) -> tuple[list[BoardUpdate], int]:
    """The boards' updates, and how many of the events' changes their boards take."""
    # every board's in one read
    named = {board for event in events for board, *_ in event.scores}
    named |= {key.partition("@")[0] for event in events for key, _ in event.rechecked}
    settings = store.boards_named(sorted(named))
    for board in sorted(named - settings.keys()):
        # made here, unless a PUT makes it meanwhile: then that one's settings
        store.add_board(BoardSettings(board))
        found = store.get_board(board)
        assert found is not None, "a board, once made, is never deleted"
        settings[board] = found

    forgotten = {board: forgotten_before(board_settings) for board, board_settings in settings.items()}
    # stored key → its board, its season's start, and player → the changes in log order
    pending: dict[str, tuple[str, int | None, dict[str, list[Change]]]] = {}
    taken = 0
    for event in events:
        for board, player, value, subscore, carried in event.scores:
            board_settings = settings[board]
            if value is not None and not _takes(board_settings, event):  # a deletion applies whenever
                continue
            if (before := forgotten[board]) is not None and event.receivedAt < before:
                raise Refused(f"received before the oldest season leaderboard {board} remembers "
                              f"({to_rfc3339(before)}), so in none it can name")
            season = season_start(board_settings.reset, event.receivedAt, board_settings.epochs)
            brings = tiebreak(board_settings.ties, board_settings.order, event.receivedAt, subscore)
            key = season_key(board, season)
            pending.setdefault(key, (board, season, defaultdict(list)))[2][player].append((value, brings, carried))
            taken += 1
        for key, player in event.rechecked:
            board, _, start = key.partition("@")
            pending.setdefault(key, (board, int(start) if start else None, defaultdict(list)))[2].setdefault(player, [])
    banned = set(store.banned(list({player for _, _, players in pending.values() for player in players})))

    def update(key: str) -> BoardUpdate:
        board, season, players = pending[key]
        return _update(key, settings[board], season=season, players=players, banned=banned, store=store, tree=tree)

    return _two_at_once(update, list(pending)), taken


T = TypeVar("T")
R = TypeVar("R")


def _two_at_once(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`work` of each item, in order, done by this thread and one more, each taking the next item:
    while one waits for the database the other computes (a connection each, as the adapters keep one
    a thread): 3-11% more updates a second on boards of large ties; more threads were slower, the
    GIL being the rest. Returns once both are done, also after a failure, which stops both taking
    items: nothing of a failed batch runs on beside its retry. Raises the first failure."""
    done: dict[int, R] = {}
    failed: list[Exception] = []
    taken = itertools.count()  # a C iterator: each number goes to one thread

    def take() -> None:
        while not failed and (i := next(taken)) < len(items):
            try:
                done[i] = work(items[i])
            except Exception as error:
                failed.append(error)  # raised below, on the batch's thread

    # the other thread: one a process (ports.threads)
    other = kept_pool("ranking-boards", 1).submit(take)
    take()
    other.result()
    if failed:
        raise failed[0]
    return [done[i] for i in range(len(items))]



def _update(key: str, settings: BoardSettings, *, season: int | None, players: dict[str, list[Change]],
            banned: set[str], store: RankingStore, tree: Tree) -> BoardUpdate:
    """One board season's share of a batch. The trees count the records shown: a banned player's
    record is kept as its updates make it, hidden, and shown again once the ban is lifted."""
    records = store.records(key, list(players))
    moves: dict[str, tuple[Key | None, Key | None]] = {}
    written: dict[str, Key] = {}
    metadata: dict[str, str | None] = {}
    removed = []
    for player, changes in players.items():
        record = records.get(player)
        was = None if record is None else (record.score, record.tiebreak)
        latest, kept = _fold(settings, was, changes)
        hidden = player in banned
        if latest is None:
            if record is not None:
                removed.append(player)
        elif latest != was or (record is not None and hidden != record.hidden):
            written[player] = latest
        shown_before = None if record is None or record.hidden else was
        shown = None if hidden else latest
        if shown != shown_before:
            moves[player] = (shown_before, shown)
        if latest is not None and kept is not _KEPT and (kept is not None or was is not None):
            metadata[player] = kept if isinstance(kept, str) else None
    deltas = tree.deltas([(None if old is None else old[0], None if new is None else new[0])
                          for old, new in moves.values()])
    tie_deltas, cleared = ({}, []) if settings.ties == "shared" else tie_changes(store, key, moves)
    return BoardUpdate(settings, {player: score for player, (score, _) in written.items()}, deltas, key, season,
                       removed, metadata, {player: t for player, (_, t) in written.items() if t}, tie_deltas,
                       cleared, frozenset(player for player in written if player in banned),
                       scored=any(value is not None for changes in players.values() for value, _, _ in changes))
