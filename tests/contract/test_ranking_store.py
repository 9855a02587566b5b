"""Leaderboards against brute force, on both storages: random sequences of score updates go
through the real worker (batched, some batches redelivered) and every read — rank, score at a
position, top with offset, around a player, the rank of a score — must equal the brute-force
answer, for both orders and all operators, with ties, negative scores and the int64 extremes."""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.issues import SqliteIssueStore
from adapters.embedded.log import SqliteEventLog
from adapters.spill.directory import DirectorySpillStore
from pipeline.topics import DEADLETTER, SCORES
from ports import MAX_EPOCHS, BoardSettings, BoardUpdate, Checkpoint, LogRecord, NodeRange, OutgoingRecord, RankingStore
from ports.errors import BansLifted, InvalidField, NotFound
from ports.issues import Alert
from ports.limits import INT64_MAX, INT64_MIN
from ports.timeutil import now_ms, parse_epoch_ms, to_rfc3339
from ranking import bans, leaderboard
from ranking import seasons as ranking_seasons
from ranking import ties as ranking_ties
from ranking.capture import capture_removal
from ranking.model import BoardSettingsBody
from ranking.queries import score_at
from ranking.season_ends import (
    FINAL_TOP,
    LOOKING_MS,
    MAX_AFTER_S,
    SeasonEndPolicy,
    ended_seasons,
    tell_season_ends,
)
from ranking.seasons import SEASON_PURGE_GRACE_MS, purge_seasons, season_key, season_start
from ranking.tree import DEFAULT_TREE
from ranking.worker import apply_scores
from tests.brute import BruteBoard

TREE = DEFAULT_TREE
# found from outside: MySQL's utf8mb4_bin compared "p0" and "p0 " as one player, and the tree counted both
PLAYERS = [f"p{i}" for i in range(12)] + ["p0 ", "p0  "]
scores = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX]),
    st.integers(INT64_MIN, INT64_MAX),
)
updates = st.lists(st.tuples(st.sampled_from(PLAYERS), scores), min_size=1, max_size=40)
ORDERS = st.sampled_from(["desc", "asc"])
OPERATORS = st.sampled_from(["best", "set", "incr", "decr"])
# the sizes of the worker's batches, taken in turn
CUTS = st.lists(st.integers(1, 10), min_size=1, max_size=6)


@pytest.fixture
def log(tmp_path: Path):
    log = SqliteEventLog(tmp_path / "log.sqlite")
    yield log
    log.close()


def records(board: str, batch: list[tuple[str, int]], offsets: itertools.count) -> list[LogRecord]:
    """One log record per update, as capture would publish single-score requests; a topic per
    board, so each example's offsets start afresh."""
    return [
        LogRecord(f"scores.{board}", 0, next(offsets), json.dumps({
            "eventId": str(uuid.uuid4()), "receivedAt": 0,
            "scores": [{"board": board, "playerId": player, "score": value}],
        }).encode(), board.encode(), (), 0)
        for player, value in batch
    ]


def in_cuts(stream: list[Any], cuts: list[int]) -> Iterator[list[Any]]:
    """The stream in consecutive parts of the cuts' sizes, cycling through them."""
    done = 0
    for cut in itertools.cycle(cuts):
        if done >= len(stream):
            return
        yield stream[done : done + cut]
        done += cut


def applied(batch: list[LogRecord], store: RankingStore, log: SqliteEventLog, redeliver: bool) -> None:
    """The batch through the worker, and again (applying nothing) when `redeliver`."""
    apply_scores(batch, store, log, TREE)
    if redeliver:
        assert apply_scores(batch, store, log, TREE) == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=ORDERS,
    operator=st.sampled_from(["best", "set", "incr"]),
    sequence=updates,
    cuts=st.lists(st.integers(1, 10), min_size=1, max_size=8),
    redeliver=st.booleans(),
    probe=scores,
)
def test_leaderboard_reads_equal_brute_force(ranking_store: RankingStore, log, order, operator, sequence, cuts,
                                             redeliver, probe):
    board = f"b-{uuid.uuid4().hex[:12]}"  # a fresh board per example: boards share nothing
    ranking_store.put_board(BoardSettings(board, order, operator))
    brute = BruteBoard(order, operator)
    offsets = itertools.count()
    for part in in_cuts(sequence, cuts):
        applied(records(board, part, offsets), ranking_store, log, redeliver)
        for player, value in part:
            brute.apply(player, value)

    expected = brute.ordered()
    assert leaderboard.describe(ranking_store, TREE, board)["players"] == len(expected)
    for entry in expected:
        assert leaderboard.player(ranking_store, TREE, board, entry["playerId"]) == entry
    for position, entry in enumerate(expected, start=1):
        assert score_at(TREE, ranking_store, board, order, position) == entry["score"]
    assert score_at(TREE, ranking_store, board, order, len(expected) + 1) is None
    for offset, limit in [(0, 1000), (0, 3), (2, 4), (len(expected) - 1, 5), (len(expected), 5)]:
        if offset >= 0:
            got = leaderboard.top(ranking_store, TREE, board, offset=offset, limit=limit)
            assert got["entries"] == expected[offset : offset + limit]
    for index, entry in enumerate(expected):
        got = leaderboard.around(ranking_store, TREE, board, entry["playerId"], radius=2)
        assert got["entries"] == expected[max(0, index - 2) : index + 3]
    assert leaderboard.rank_for_score(ranking_store, TREE, board, probe)["rank"] == brute.rank(probe)


def test_a_board_appears_on_its_first_score_as_desc_best(ranking_store: RankingStore, log):
    apply_scores(records("fresh", [("a", 5), ("a", 3)], itertools.count()), ranking_store, log, TREE)
    assert ranking_store.get_board("fresh") == BoardSettings("fresh", "desc", "best")
    assert ranking_store.scores("fresh", ["a", "b"]) == {"a": 5}


def test_boards_by_name_with_their_settings(ranking_store: RankingStore, log):
    assert ranking_store.boards("", 10) == []
    ranking_store.put_board(BoardSettings("weekly", "asc", "set"))
    apply_scores(records("daily", [("a", 5)], itertools.count()), ranking_store, log, TREE)
    ranking_store.put_board(BoardSettings("all-time", "desc", "incr"))
    assert ranking_store.boards("", 10) == [
        BoardSettings("all-time", "desc", "incr"), BoardSettings("daily", "desc", "best"),
        BoardSettings("weekly", "asc", "set")]
    assert ranking_store.boards("all-time", 1) == [BoardSettings("daily", "desc", "best")]
    assert ranking_store.boards("weekly", 10) == []
    assert ranking_store.boards_named(["weekly", "nowhere", "daily"]) == {
        "weekly": BoardSettings("weekly", "asc", "set"), "daily": BoardSettings("daily", "desc", "best")}
    assert ranking_store.boards_named([]) == {}


class _WriteBetweenReads:
    """The store, with a worker's write (from another thread, as the worker runs) landing just
    before the list's leaf counts are read (the second read of level 0, after the walk down to the
    first entry): where a list's entries and its ranks were read apart."""

    def __init__(self, store: RankingStore, write: Callable[[], None]) -> None:
        self._store = store
        self._write = write
        self._leaf_reads = 0

    def node_counts(self, board: str, nodes: NodeRange) -> dict[int, int]:
        if nodes.level == 0:
            self._leaf_reads += 1
            if self._leaf_reads == 2:
                writer = threading.Thread(target=self._write)
                writer.start()
                writer.join()
        return self._store.node_counts(board, nodes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_list_read_while_the_worker_moves_a_player_is_one_state(ranking_store: RankingStore):
    """Found by the fault suite: a top read while the worker moved the only player of a score
    read that score with the entries and its leaf count after the move: KeyError, a 500."""
    board = f"b{uuid.uuid4().hex[:6]}"

    def move(player: str, old: int | None, new: int, offset: int) -> None:
        deltas = TREE.deltas([(old, new)])
        ranking_store.apply(Checkpoint("w", f"{board}-0", offset - 1, offset),
                            [BoardUpdate(BoardSettings(board), {player: new}, deltas)])

    move("a", None, 50, 0)
    move("b", None, 40, 1)
    store = _WriteBetweenReads(ranking_store, lambda: move("a", 50, 30, 2))
    assert leaderboard.top(store, TREE, board)["entries"] == [  # type: ignore[arg-type]
        {"rank": 1, "playerId": "a", "score": 50, "metadata": None},
        {"rank": 2, "playerId": "b", "score": 40, "metadata": None}]
    assert leaderboard.top(ranking_store, TREE, board)["entries"] == [
        {"rank": 1, "playerId": "b", "score": 40, "metadata": None},
        {"rank": 2, "playerId": "a", "score": 30, "metadata": None}]


@pytest.mark.parametrize("bad", [
    {"board": "b", "playerId": "p", "score": "7"},  # a number in a string
    {"board": "b", "playerId": "p", "score": 7.5},
    {"board": "b", "playerId": "p", "score": INT64_MAX + 1},  # past what a store keeps
    {"board": "b", "playerId": "p", "score": 1, "subscore": INT64_MIN - 1},
    {"board": "b", "playerId": "", "score": 1},
    {"board": "b", "playerId": "p" * 129, "score": 1},
    {"board": "b/c", "playerId": "p", "score": 1},  # a name no route can ask for
    {"board": "b", "playerId": "p"},
    {"board": "b", "playerId": "p", "score": 1, "metadata": {str(k): k for k in range(17)}},
    {"board": "b", "playerId": "p", "score": 1, "metadata": {"name": "n" * 129}},
    {"board": "b", "playerId": "p", "score": 1, "metadata": {"replay": "INFINITY"}},  # 1e400: no JSON holds it again
])
def test_a_score_record_the_worker_cannot_read_is_dead_lettered_alone(ranking_store: RankingStore, log,
                                                                       bad: dict[str, Any]):
    """The worker reads records as capture writes them, by types and bounds alone
    (ranking.model.ScoreRecord): what capture would have refused is still refused, and only that."""
    board = f"b{uuid.uuid4().hex[:6]}"
    topic = f"{SCORES}.{board}"
    good = [r.value for r in records(board, [("a", 5), ("b", 3)], itertools.count())]
    poisoned = json.dumps({"eventId": str(uuid.uuid4()), "receivedAt": 0, "scores": [
        bad | {"board": board + bad["board"][1:]}]}).replace('"INFINITY"', "1e400").encode()
    log.publish(topic, [OutgoingRecord(value, board.encode()) for value in (good[0], poisoned, good[1])])
    assert apply_scores(log.consumer("worker", topic).poll(10, 1 << 20, 1), ranking_store, log, TREE) == 2
    assert [e["playerId"] for e in leaderboard.top(ranking_store, TREE, board)["entries"]] == ["a", "b"]
    dead = log.consumer("t", DEADLETTER).poll(10, 1 << 20, timeout_s=0.1)
    assert [d.value for d in dead] == [poisoned]
    assert dict(dead[0].headers)["reason"].startswith(b"malformed score record: scores.0.")


def test_metadata_a_record_lists_in_another_order_is_kept_sorted(ranking_store: RankingStore, log):
    """Found in review: a record of a release before metadata was kept sorted lists it as its client
    sent it; the worker that reads records by types alone kept that order, where it had sorted."""
    board = f"b{uuid.uuid4().hex[:6]}"
    topic = f"{SCORES}.{board}"
    unsorted = {"team": "red", "name": "Ann", "level": 3}
    log.publish(topic, [OutgoingRecord(json.dumps({"eventId": str(uuid.uuid4()), "receivedAt": 0, "scores": [
        {"board": board, "playerId": "a", "score": 5, "metadata": unsorted}]}).encode(), board.encode())])
    apply_scores(log.consumer("worker", topic).poll(10, 1 << 20, 1), ranking_store, log, TREE)
    assert list(leaderboard.player(ranking_store, TREE, board, "a")["metadata"] or {}) == ["level", "name", "team"]


def test_the_worker_s_checkpoints_store_the_offsets_they_covered(ranking_store: RankingStore):
    partition = f"b{uuid.uuid4().hex[:6]}-0"
    ranking_store.apply(Checkpoint("w", partition, -1, 2, first_offset=1), [])
    assert ranking_store.covered("w", partition, [0, 1, 2, 3]) == {1, 2}
    assert ranking_store.covered("other", partition, [1]) == set()


# a season every ten minutes: a stream over forty minutes crosses four resets
EVERY_TEN_MINUTES = "*/10 * * * *"
PERIODS = {EVERY_TEN_MINUTES: 600_000, "*/15 * * * *": 900_000}
YEARLY = "0 0 1 1 *"
T0 = 1_795_000_200_000  # 2026-11-17T11:50:00Z, a reset
metadata = st.none() | st.fixed_dictionaries({"n": st.integers(0, 3)})
changes = st.lists(st.tuples(st.integers(0, 40 * 60_000 - 1), st.sampled_from(PLAYERS[:6]),
                             st.none() | scores, metadata), min_size=1, max_size=40)
Change = tuple[int, str, int | None, dict[str, int] | None]


def timed_records(board: str, stream: list[Any], offsets: itertools.count) -> list[LogRecord]:
    """A record per change as capture publishes them, received `at` ms after T0: a score with
    perhaps metadata (and a subscore, a fifth item), or (None) the player's record deleted."""
    return [
        LogRecord(f"scores.{board}", 0, next(offsets), json.dumps({
            "eventId": str(uuid.uuid4()), "receivedAt": T0 + at,
            "scores": [] if value is None else [{"board": board, "playerId": player, "score": value,
                                                 **({} if carried is None else {"metadata": carried}),
                                                 **({"subscore": subscore[0]} if subscore and subscore[0] is not None
                                                    else {})}],
            "removed": [{"board": board, "playerId": player}] if value is None else [],
        }).encode(), board.encode(), (), 0)
        for at, player, value, carried, *subscore in stream
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=ORDERS,
    operator=OPERATORS,
    schedule=st.sampled_from(["never", EVERY_TEN_MINUTES]),
    stream=changes,
    epochs=st.lists(st.tuples(st.integers(0, 40 * 60_000 - 1), st.sampled_from(["never", *PERIODS])), max_size=3),
    cuts=CUTS,
    redeliver=st.booleans(),
    probe=scores,
)
def test_seasons_and_deletions_equal_brute_force(ranking_store: RankingStore, log, order, operator, schedule, stream,
                                                 epochs, cuts, redeliver, probe):
    """Changes received in time order (as capture stamps them) and applied in random batches, some
    redelivered: each season's reads, records' metadata included, equal a brute-force board of the
    changes received in it. Found from outside: a deletion of a player with no record listed its
    season, which then counted among those retention keeps, and a season with scores went."""
    stream = sorted(stream, key=lambda change: change[0])
    board = f"b-{uuid.uuid4().hex[:12]}"
    # wiped or rescheduled at these times, the batches applied after (the worker lags): each update
    # by its receivedAt, under the schedule in force then
    history = ((0, schedule), *sorted((T0 + at, then) for at, then in epochs)) if epochs else ()
    current = history[-1][1] if history else schedule
    ranking_store.put_board(BoardSettings(board, order, operator, current, history))

    def season_of(at: int) -> int:
        since, in_force = max(((s, e) for s, e in history if s <= T0 + at), default=(0, schedule))
        return since if in_force == "never" else max(since, (T0 + at) // PERIODS[in_force] * PERIODS[in_force])

    brutes: dict[int, BruteBoard] = {}
    offsets = itertools.count()
    for part in in_cuts(stream, cuts):
        applied(timed_records(board, part, offsets), ranking_store, log, redeliver)
        for at, player, value, carried in part:
            # a season is listed once a score comes for it, however batched: a deletion of no record alone
            # lists none
            if value is not None:
                brutes.setdefault(season_of(at), BruteBoard(order, operator)).apply(player, value, carried)
            elif (brute := brutes.get(season_of(at))) is not None:
                brute.remove(player)

    assert ranking_store.seasons(board, None, 100) == sorted(brutes, reverse=True)
    for season, brute in brutes.items():
        expected = brute.ordered()
        assert leaderboard.describe(ranking_store, TREE, board, season)["players"] == len(expected)
        for entry in expected:
            assert leaderboard.player(ranking_store, TREE, board, entry["playerId"], season) == entry
        for offset, limit in [(0, 1000), (1, 2)]:
            got = leaderboard.top(ranking_store, TREE, board, offset=offset, limit=limit, season=season)
            assert got["entries"] == expected[offset : offset + limit]
        for index, entry in enumerate(expected):
            got = leaderboard.around(ranking_store, TREE, board, entry["playerId"], radius=1, season=season)
            assert got["entries"] == expected[max(0, index - 1) : index + 2]
        assert leaderboard.rank_for_score(ranking_store, TREE, board, probe, season)["rank"] == brute.rank(probe)


def test_a_change_of_schedule_starts_its_season_after_what_a_worker_may_hold(ranking_store: RankingStore,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """Found from outside: a change of schedule started its season at the request's own time, and a
    worker reads a board's settings once a batch, so a batch read before the change committed put
    the updates received since that time in the season before. It starts EPOCH_DELAY_MS after the
    request, as a wipe's season does."""
    monkeypatch.setattr(leaderboard, "EPOCH_DELAY_MS", 60_000)  # longer than a slow machine's PUT
    board = f"b-{uuid.uuid4().hex[:12]}"
    # yearly: no reset of its own comes within the delay
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=YEARLY))
    stale = ranking_store.get_board(board)  # as a worker read them before the change
    asked = now_ms()
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    answered = now_ms()
    fresh = ranking_store.get_board(board)
    assert stale is not None and fresh is not None
    for received in range(asked, answered + 1):
        assert season_start(fresh.reset, received, fresh.epochs) == season_start(stale.reset, received, stale.epochs)
    started = season_start(fresh.reset, answered + leaderboard.EPOCH_DELAY_MS, fresh.epochs)
    assert started is not None
    assert started != season_start(stale.reset, answered + leaderboard.EPOCH_DELAY_MS, stale.epochs)
    # the board names that start as its next reset, as another's names its wipe's
    assert leaderboard.describe(ranking_store, TREE, board)["nextReset"] == to_rfc3339(started)
    other = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, other, BoardSettingsBody(reset=YEARLY))
    wiped = leaderboard.wipe(ranking_store, other)
    assert leaderboard.describe(ranking_store, TREE, other)["nextReset"] == wiped["season"]


def test_a_change_of_schedule_in_the_moment_before_a_wipe_s_season_starts_keeps_that_season(
        ranking_store: RankingStore, monkeypatch: pytest.MonkeyPatch):
    """Found in review: with both a moment late, a PUT in the second after a wipe started its season
    after the wipe's, which then lasted under a second, under the schedule before."""
    monkeypatch.setattr(leaderboard, "EPOCH_DELAY_MS", 60_000)
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=YEARLY))
    wiped = leaderboard.wipe(ranking_store, board)
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    settings = ranking_store.get_board(board)
    assert settings is not None and settings.epochs is not None
    assert settings.epochs[-1] == (parse_epoch_ms(wiped["season"]), EVERY_TEN_MINUTES)
    assert leaderboard.describe(ranking_store, TREE, board)["nextReset"] == wiped["season"]


def test_a_score_received_before_the_seasons_a_board_remembers_is_dead_lettered(ranking_store: RankingStore, log):
    """Found in review: a board remembers its last MAX_EPOCHS wipes and changes of schedule; a score
    received before the oldest of them (replayed after the board had been wiped that often since)
    was put in the board's first season."""
    board = f"w-{uuid.uuid4().hex[:8]}"
    hours = 3_600_000
    # the first ones forgotten; the last at T0
    epochs = tuple((T0 - 3 * hours * n, "never") for n in reversed(range(MAX_EPOCHS)))
    ranking_store.put_board(BoardSettings(board, epochs=epochs))
    forgotten, remembered = timed_records(board, [(epochs[0][0] - hours - T0, "late", 5, None), (0, "now", 7, None)],
                                          itertools.count())
    log.publish(f"{SCORES}.{board}", [OutgoingRecord(r.value, board.encode()) for r in (forgotten, remembered)])
    assert apply_scores(log.consumer("worker", f"{SCORES}.{board}").poll(10, 1 << 20, 1), ranking_store, log,
                        TREE) == 1
    assert ranking_store.seasons(board, None, 10) == [epochs[-1][0]]
    assert [e["playerId"] for e in leaderboard.top(ranking_store, TREE, board)["entries"]] == ["now"]
    [dead] = log.consumer("t", DEADLETTER).poll(10, 1 << 20, timeout_s=0.1)
    assert dead.value == forgotten.value
    assert dict(dead.headers)["reason"].startswith(f"received before the oldest season leaderboard {board} "
                                                   "remembers".encode())


def test_a_board_that_never_resets_has_one_season_until_a_wipe(ranking_store: RankingStore, log,
                                                                  monkeypatch: pytest.MonkeyPatch):
    apply_scores(records("forever", [("a", 5)], itertools.count()), ranking_store, log, TREE)
    # a wipe starts its season a second after the request (leaderboard.wipe): here, at once
    monkeypatch.setattr(leaderboard, "EPOCH_DELAY_MS", 0)
    with pytest.raises(NotFound):
        leaderboard.top(ranking_store, TREE, "forever", season=T0)
    assert ranking_store.seasons("forever", None, 10) == [0]
    assert leaderboard.describe(ranking_store, TREE, "forever")["season"] is None
    wiped = leaderboard.wipe(ranking_store, "forever")
    assert leaderboard.describe(ranking_store, TREE, "forever") | {"nextReset": None} == {
        "board": "forever", "order": "desc", "operator": "best", "reset": "never", "ties": "shared",
        "keepSeasons": None, "startsAt": None, "endsAt": None, "maxAttempts": None, "maxPlayers": None, "players": 0,
        "season": wiped["season"], "nextReset": None}
    # what it held: the season before, as it was
    assert [e["playerId"] for e in leaderboard.top(ranking_store, TREE, "forever", season=0)["entries"]] == ["a"]
    # its settings set again keep the wipe; a new schedule starts a season of its own
    leaderboard.configure(ranking_store, "forever", BoardSettingsBody(operator="set"))
    assert leaderboard.describe(ranking_store, TREE, "forever")["season"] == wiped["season"]
    leaderboard.configure(ranking_store, "forever", BoardSettingsBody(reset="monthly"))
    assert leaderboard.describe(ranking_store, TREE, "forever")["season"] > wiped["season"]
    assert ranking_store.get_board("forever").epochs[-1][1] == "monthly"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=ORDERS, first=updates, meanwhile=updates, limit=st.integers(1, 4),
       pages_before=st.integers(0, 3), down=st.booleans())
def test_cursor_pages_neither_skip_nor_repeat_a_player_whose_score_stayed(ranking_store: RankingStore, log, order,
                                                                          first, meanwhile, limit, pages_before,
                                                                          down):
    """Keyset paging of top while scores change between pages, down from the first page by
    nextCursor or up from the last by prevCursor: every player whose score did not change is listed
    exactly once; with nothing changing, the pages are the whole board in order."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    ranking_store.put_board(BoardSettings(board, order, "set"))
    offsets = itertools.count()
    apply_scores(records(board, first, offsets), ranking_store, log, TREE)
    brute = BruteBoard(order, "set")
    for player, value in first:
        brute.apply(player, value)
    onward = "nextCursor" if down else "prevCursor"
    seen: list[dict[str, Any]] = []

    def turned(page: Any) -> Any:
        """`page` read, and the page it leads to (None past the board's end)."""
        nonlocal seen
        seen = seen + page["entries"] if down else page["entries"] + seen
        return None if page[onward] is None else \
            leaderboard.top(ranking_store, TREE, board, limit=limit, cursor=page[onward])

    page = leaderboard.top(ranking_store, TREE, board, limit=limit, offset=0 if down else max(0, len(brute.scores) - 1))
    for _ in range(pages_before):
        if page[onward] is None:
            break
        page = turned(page)
    apply_scores(records(board, meanwhile, offsets), ranking_store, log, TREE)
    changed = {player for player, value in meanwhile if brute.scores.get(player) != value or player not in brute.scores}
    while page is not None:
        page = turned(page)
    listed = [entry["playerId"] for entry in seen]
    for player in brute.scores.keys() - changed:
        assert listed.count(player) == 1, player
    if not changed:
        assert seen == brute.ordered()


def test_around_goes_on_below_its_last_entry(ranking_store: RankingStore, log):
    apply_scores(records("ladder", [(f"p{i}", i) for i in range(6)], itertools.count()), ranking_store, log, TREE)
    window = leaderboard.around(ranking_store, TREE, "ladder", "p3", radius=1)
    assert [e["playerId"] for e in window["entries"]] == ["p4", "p3", "p2"]
    rest = leaderboard.top(ranking_store, TREE, "ladder", limit=10, cursor=window["nextCursor"])
    assert [e["playerId"] for e in rest["entries"]] == ["p1", "p0"] and rest["nextCursor"] is None
    assert leaderboard.around(ranking_store, TREE, "ladder", "p1", radius=1)["nextCursor"] is None
    with pytest.raises(InvalidField):
        leaderboard.top(ranking_store, TREE, "ladder", offset=1, cursor=window["nextCursor"])

    assert window["prevCursor"] is not None  # p5 is above
    up = leaderboard.top(ranking_store, TREE, "ladder", limit=10, cursor=window["prevCursor"])
    assert [e["playerId"] for e in up["entries"]] == ["p5"] and up["prevCursor"] is None
    assert [e["playerId"] for e in leaderboard.top(ranking_store, TREE, "ladder", limit=10,
                                                    cursor=up["nextCursor"])["entries"]] == ["p4", "p3", "p2", "p1",
                                                                                               "p0"]


def test_a_page_past_what_went_meanwhile_leads_back_where_the_board_goes_on(ranking_store: RankingStore, log):
    """Found in review: a cursor whose entries beyond it had all gone meanwhile led to an empty page
    without cursors, and its reader had to start again from the first page."""
    ladder = [(f"p{i}", i) for i in range(6)]

    def removed(board: str, players: list[str], offsets: itertools.count) -> None:
        apply_scores(timed_records(board, [(0, player, None, None) for player in players], offsets), ranking_store,
                     log, TREE)

    for board, gone, onward, back, kept in [("thinned-below", 4, "nextCursor", "prevCursor", ["p5", "p4"]),
                                            ("thinned-above", -4, "prevCursor", "nextCursor", ["p1", "p0"])]:
        offsets = itertools.count()
        apply_scores(records(board, ladder, offsets), ranking_store, log, TREE)
        page = leaderboard.top(ranking_store, TREE, board, limit=2, offset=0 if onward == "nextCursor" else 4)
        removed(board, [player for player, _ in (ladder[:gone] if gone > 0 else ladder[gone:])], offsets)
        empty = leaderboard.top(ranking_store, TREE, board, limit=2, cursor=page[onward])
        assert empty["entries"] == [] and empty[onward] is None
        again = leaderboard.top(ranking_store, TREE, board, limit=5, cursor=empty[back])
        assert [e["playerId"] for e in again["entries"]] == kept
        # with nothing left either side of the cursor, it points nowhere
        removed(board, kept, offsets)
        assert leaderboard.top(ranking_store, TREE, board, limit=2, cursor=page[onward]) == {
            "entries": [], "nextCursor": None, "prevCursor": None}


def paged_both_ways(store: RankingStore, board: str, expected: list[dict[str, Any]], limit: int,
                    season: int | None = None) -> None:
    """Every page of the board, by offset, by cursor down from the first page and up from the last,
    and around each player, equals `expected` (the board as brute force has it), each page's cursors
    given exactly where the board goes on beyond it and leading to the entries there."""

    def top(**asked: Any) -> Any:
        return leaderboard.top(store, TREE, board, limit=limit, season=season, **asked)

    def turned(cursor: str) -> Any:
        """The page a cursor leads to: in the season it names, none asked for beside it."""
        return leaderboard.top(store, TREE, board, limit=limit, cursor=cursor)

    def cursors_lead_on(page: Any, first: int, last: int) -> None:
        """`page` lists expected[first:last]: its cursors lead to the `limit` entries either side."""
        assert (page["prevCursor"] is not None) == (first > 0 and last > first)
        assert (page["nextCursor"] is not None) == (last < len(expected) and last > first)
        if page["prevCursor"] is not None:
            assert turned(page["prevCursor"])["entries"] == expected[max(0, first - limit) : first]
        if page["nextCursor"] is not None:
            assert turned(page["nextCursor"])["entries"] == expected[last : last + limit]

    for offset in range(len(expected) + 1):
        page = top(offset=offset)
        assert page["entries"] == expected[offset : offset + limit]
        cursors_lead_on(page, offset, min(offset + limit, len(expected)))
    down, page = [], top()
    while True:
        down += page["entries"]
        if page["nextCursor"] is None:
            break
        page = turned(page["nextCursor"])
    assert down == expected
    up = page["entries"]
    while page["prevCursor"] is not None:
        page = turned(page["prevCursor"])
        up = page["entries"] + up
    assert up == expected
    for index, entry in enumerate(expected):
        window = leaderboard.around(store, TREE, board, entry["playerId"], radius=1, season=season)
        assert window["entries"] == expected[max(0, index - 1) : index + 2]
        cursors_lead_on(window, max(0, index - 1), min(index + 2, len(expected)))


# few scores and subscores, many at the same millisecond: ties at every level of the key
# tie trees from 2 players, from 3 (scores cross into trees and out), and from the default (none here)
TREES_FROM = st.sampled_from([2, 3, ranking_ties.TIE_TREE_FROM])
# trees built with their floors' nodes at most 1/room full: 1 gives these small ties floors, which
# the default seldom does
FLOOR_ROOMS = st.sampled_from([1, ranking_ties.FLOOR_ROOM])
# players asked about from which a ban list of a quarter as many is read whole: 1 and 3 read these
# tests' short lists so
WHOLE_BAN_LISTS_FROM = st.sampled_from([1, 3, 256])
tie_values = st.one_of(st.integers(-2, 2), st.sampled_from([INT64_MIN, INT64_MAX]))
tie_changes = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(PLAYERS[:8]), st.none() | tie_values,
                                 st.none() | tie_values), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=ORDERS,
    operator=OPERATORS,
    ties=st.sampled_from(["earliest", "subscore"]),
    stream=tie_changes,
    cuts=CUTS,
    redeliver=st.booleans(),
    probe=tie_values,
    probe_subscore=st.none() | tie_values,
    limit=st.integers(1, 4),
    tree_from=TREES_FROM,
    floor_room=FLOOR_ROOMS,
)
def test_tie_modes_equal_brute_force(ranking_store: RankingStore, log, monkeypatch, order, operator, ties, stream,
                                     cuts, redeliver, probe, probe_subscore, limit, tree_from, floor_room):
    """Updates (with subscores; None: the record deleted) received in time order, some in the same
    millisecond, applied in random batches, some redelivered: every player has a rank of its own,
    and every read equals a brute-force board that sorts by score, then tiebreak, then playerId."""
    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", tree_from)
    monkeypatch.setattr(ranking_ties, "FLOOR_ROOM", floor_room)
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(order=order, operator=operator, ties=ties))
    brute = BruteBoard(order, operator, ties)
    offsets = itertools.count()
    for part in in_cuts(stream, cuts):
        applied(timed_records(board, [(at, player, value, None, subscore) for at, player, value, subscore in part],
                              offsets), ranking_store, log, redeliver)
        for at, player, value, subscore in part:
            brute.remove(player) if value is None else brute.apply(player, value, at=T0 + at, subscore=subscore)

    expected = brute.ordered()
    assert [e["rank"] for e in expected] == list(range(1, len(expected) + 1))
    assert leaderboard.describe(ranking_store, TREE, board)["players"] == len(expected)
    for entry in expected:
        assert leaderboard.player(ranking_store, TREE, board, entry["playerId"]) == entry
    paged_both_ways(ranking_store, board, expected, limit)
    for index, entry in enumerate(expected):
        got = leaderboard.around(ranking_store, TREE, board, entry["playerId"], radius=2)
        assert got["entries"] == expected[max(0, index - 2) : index + 3]
    friends = leaderboard.ranks_of(ranking_store, TREE, board, PLAYERS[::-1])
    assert friends["entries"] == expected
    assert leaderboard.rank_for_score(ranking_store, TREE, board, probe, subscore=probe_subscore)["rank"] == \
        brute.rank(probe, probe_subscore)


def test_a_board_s_ties_are_chosen_when_it_is_made(ranking_store: RankingStore):
    leaderboard.configure(ranking_store, "firsts", BoardSettingsBody(ties="earliest"))
    # settings set again without ties keep them; other ties are refused
    assert leaderboard.configure(ranking_store, "firsts", BoardSettingsBody(operator="set"))[1]["ties"] == "earliest"
    with pytest.raises(InvalidField) as refused:
        leaderboard.configure(ranking_store, "firsts", BoardSettingsBody(ties="shared"))
    assert refused.value.field == "ties"
    assert ranking_store.get_board("firsts") == BoardSettings("firsts", "desc", "set", ties="earliest")


ban_ops = st.lists(st.one_of(
    st.tuples(st.just("score"), st.integers(0, 1), st.sampled_from(PLAYERS[:6]), tie_values, st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 1), st.sampled_from(PLAYERS[:6]), st.none(), st.none()),
    st.tuples(st.sampled_from(["ban", "unban"]), st.none(), st.sampled_from(PLAYERS[:6]), st.none(), st.none()),
), min_size=1, max_size=40)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(boards=st.lists(st.tuples(st.sampled_from(["desc", "asc"]), st.sampled_from(["best", "set", "incr"]),
                                 st.sampled_from(["shared", "earliest", "subscore"])), min_size=2, max_size=2),
       ops=ban_ops, cuts=st.lists(st.integers(1, 8), min_size=1, max_size=5), redeliver=st.booleans(),
       tree_from=TREES_FROM, floor_room=FLOOR_ROOMS, whole_from=WHOLE_BAN_LISTS_FROM)
def test_bans_hide_a_player_on_every_board_until_lifted(ranking_store: RankingStore, log, monkeypatch, boards, ops,
                                                        cuts, redeliver, tree_from, floor_room, whole_from):
    """Scores, deletions, bans and their lifting, in random batches: once the workers applied
    what the bans asked, every board equals a brute-force board without the banned players, whose
    records took their updates meanwhile (a lifted ban shows the record they would have had)."""
    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", tree_from)
    monkeypatch.setattr(ranking_ties, "FLOOR_ROOM", floor_room)
    monkeypatch.setattr(ranking_store, "WHOLE_BAN_LIST_FROM", whole_from)
    names = [f"b-{uuid.uuid4().hex[:12]}" for _ in boards]
    brutes = []
    for name, (order, operator, ties) in zip(names, boards, strict=True):
        leaderboard.configure(ranking_store, name, BoardSettingsBody(order=order, operator=operator, ties=ties))
        brutes.append(BruteBoard(order, operator, ties))
    ours = set(PLAYERS[:6])
    for player in ours:  # the ban list is the store's: these players' start off it
        ranking_store.unban(player)
    offsets = itertools.count()
    pending: list[LogRecord] = []

    banned: set[str] = set()
    for index, (kind, board, player, value, at) in enumerate(ops):
        if kind in ("ban", "unban"):
            ranking_store.ban(player, T0) if kind == "ban" else ranking_store.unban(player)
            (banned.add if kind == "ban" else banned.discard)(player)
            outgoing, _ = bans.rechecks(ranking_store, player)
            pending += [LogRecord(f"scores.{names[0]}", 0, next(offsets), r.value, r.key, (), 0) for r in outgoing]
        else:
            pending.append(LogRecord(f"scores.{names[0]}", 0, next(offsets), json.dumps({
                "eventId": str(uuid.uuid4()), "receivedAt": T0 + (at or 0),
                "scores": [] if kind == "delete" else [{"board": names[board], "playerId": player, "score": value,
                                                         "subscore": value}],
                "removed": [{"board": names[board], "playerId": player}] if kind == "delete" else [],
            }).encode(), names[board].encode(), (), 0))
            brute = brutes[board]
            brute.remove(player) if kind == "delete" else brute.apply(player, value, at=T0 + (at or 0),
                                                                      subscore=value)
        if len(pending) >= cuts[index % len(cuts)]:
            applied(pending, ranking_store, log, redeliver)
            pending = []
    applied(pending, ranking_store, log, redeliver)

    for name, brute in zip(names, brutes, strict=True):
        brute.banned = banned
        expected = brute.ordered()
        assert leaderboard.describe(ranking_store, TREE, name)["players"] == len(expected)
        assert leaderboard.top(ranking_store, TREE, name, limit=100)["entries"] == expected
        for player in ours:
            if player in banned or player not in brute.scores:
                with pytest.raises(NotFound):
                    leaderboard.player(ranking_store, TREE, name, player)
        for index, entry in enumerate(expected):
            assert leaderboard.player(ranking_store, TREE, name, entry["playerId"]) == entry
            got = leaderboard.around(ranking_store, TREE, name, entry["playerId"], radius=1)
            assert got["entries"] == expected[max(0, index - 1) : index + 2]
        friends = leaderboard.ranks_of(ranking_store, TREE, name, sorted(ours))
        assert friends["entries"] == expected
        assert set(friends["missing"]) == ours - {e["playerId"] for e in expected}
    assert {player for player, _ in ranking_store.bans("", 100)} & ours == banned


# received at the same millisecond (ties at every level of an earliest key), at a reset's edges,
# or anywhere in forty minutes (four resets every ten)
moments = st.one_of(st.integers(0, 3), st.sampled_from([599_999, 600_000, 600_001, 1_200_000]),
                    st.integers(0, 40 * 60_000 - 1))
mixed_ops = st.lists(st.one_of(
    st.tuples(st.just("score"), moments, st.sampled_from(PLAYERS[:4]), tie_values, st.none() | tie_values,
              metadata),
    st.tuples(st.just("delete"), moments, st.sampled_from(PLAYERS[:4]), st.none(), st.none(), st.none()),
    st.tuples(st.sampled_from(["ban", "unban"]), st.none(), st.sampled_from(PLAYERS[:4]), st.none(), st.none(),
              st.none()),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    order=ORDERS,
    operator=OPERATORS,
    ties=st.sampled_from(["shared", "earliest", "subscore"]),
    schedule=st.sampled_from(["never", EVERY_TEN_MINUTES]),
    epochs=st.lists(st.tuples(st.integers(0, 40 * 60_000 - 1), st.sampled_from(["never", *PERIODS])), max_size=2),
    ops=mixed_ops,
    cuts=CUTS,
    redeliver=st.booleans(),
    probe=tie_values,
    probe_subscore=st.none() | tie_values,
    limit=st.integers(1, 3),
    tree_from=TREES_FROM,
    floor_room=FLOOR_ROOMS,
    whole_from=WHOLE_BAN_LISTS_FROM,
)
def test_seasons_ties_bans_and_deletions_together_equal_brute_force(
        ranking_store: RankingStore, log, monkeypatch, order, operator, ties, schedule, epochs, ops, cuts, redeliver,
        probe, probe_subscore, limit, tree_from, floor_room, whole_from):
    """The features of the tests above at once, as a live game mixes them: scores (with subscores
    and metadata) and deletions received in time order across resets, wipes and changes of
    schedule, bans and their lifting between them, in random batches, some redelivered. Every
    season's every read equals a brute-force board of the changes received in it, without the
    players banned at the end."""
    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", tree_from)
    monkeypatch.setattr(ranking_ties, "FLOOR_ROOM", floor_room)
    monkeypatch.setattr(ranking_store, "WHOLE_BAN_LIST_FROM", whole_from)
    board = f"b-{uuid.uuid4().hex[:12]}"
    history = ((0, schedule), *sorted((T0 + at, then) for at, then in epochs)) if epochs else ()
    ranking_store.put_board(BoardSettings(board, order, operator, history[-1][1] if history else schedule, history,
                                          ties=ties))

    def season_of(at: int) -> int:
        since, in_force = max(((s, e) for s, e in history if s <= T0 + at), default=(0, schedule))
        return since if in_force == "never" else max(since, (T0 + at) // PERIODS[in_force] * PERIODS[in_force])

    ours = set(PLAYERS[:6])
    for player in ours:  # the ban list is the store's: these players' start off it
        ranking_store.unban(player)
    # scores and deletions in the order capture stamps them; bans where they fell among them
    timed = iter(sorted((op for op in ops if op[1] is not None), key=lambda op: op[1]))
    ops = [next(timed) if at is not None else (kind, at, player, *rest) for kind, at, player, *rest in ops]
    brutes: dict[int, BruteBoard] = {}
    banned: set[str] = set()
    offsets = itertools.count()
    pending: list[LogRecord] = []
    for index, (kind, at, player, value, subscore, carried) in enumerate(ops):
        if kind in ("ban", "unban"):
            ranking_store.ban(player, T0) if kind == "ban" else ranking_store.unban(player)
            (banned.add if kind == "ban" else banned.discard)(player)
            outgoing, _ = bans.rechecks(ranking_store, player)
            pending += [LogRecord(f"scores.{board}", 0, next(offsets), r.value, r.key, (), 0) for r in outgoing]
        else:
            pending += timed_records(board, [(at, player, None if kind == "delete" else value, carried, subscore)],
                                     offsets)
            # a season is listed once a score comes for it; a deletion of no record alone lists none
            if kind == "score":
                brutes.setdefault(season_of(at), BruteBoard(order, operator, ties)).apply(
                    player, value, carried, at=T0 + at, subscore=subscore)
            elif (brute := brutes.get(season_of(at))) is not None:
                brute.remove(player)
        if len(pending) >= cuts[index % len(cuts)]:
            applied(pending, ranking_store, log, redeliver)
            pending = []
    applied(pending, ranking_store, log, redeliver)

    assert ranking_store.seasons(board, None, 100) == sorted(brutes, reverse=True)
    for season, brute in brutes.items():
        brute.banned = banned
        expected = brute.ordered()
        assert leaderboard.describe(ranking_store, TREE, board, season)["players"] == len(expected)
        for player in sorted(ours):
            if player in banned or player not in brute.scores:
                with pytest.raises(NotFound):
                    leaderboard.player(ranking_store, TREE, board, player, season)
        for entry in expected:
            assert leaderboard.player(ranking_store, TREE, board, entry["playerId"], season) == entry
        paged_both_ways(ranking_store, board, expected, limit, season)
        friends = leaderboard.ranks_of(ranking_store, TREE, board, sorted(ours), season)
        assert friends["entries"] == expected
        assert set(friends["missing"]) == ours - {e["playerId"] for e in expected}
        subscore = probe_subscore if ties == "subscore" else None
        assert leaderboard.rank_for_score(ranking_store, TREE, board, probe, season, subscore=subscore)["rank"] == \
            brute.rank(probe, subscore)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.none() | st.integers(0, 3), written=st.sets(st.integers(0, 14), min_size=1), now=st.integers(0, 16))
def test_retention_keeps_the_newest_past_seasons_a_board_asks_for(ranking_store: RankingStore, log, keep, written,
                                                                  now):
    """A board that resets every ten minutes, with scores in some of its seasons: the purge at
    `now` drops the past seasons beyond the newest `keep` that ended a grace ago (records, trees
    and listing), and leaves the current one (and any after it) and the other seasons' reads as
    they were."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=keep,
                                                                  ties="earliest"))
    starts = [T0 + period * PERIODS[EVERY_TEN_MINUTES] for period in sorted(written)]
    offsets = itertools.count()
    apply_scores(timed_records(board, [(start - T0 + i, f"p{i}", i, None) for start in starts for i in range(3)],
                               offsets), ranking_store, log, TREE)
    ten = PERIODS[EVERY_TEN_MINUTES]
    current, at = T0 + now * ten, T0 + now * ten + 1
    before = {start: leaderboard.top(ranking_store, TREE, board, season=start) for start in starts}
    past = [start for start in reversed(starts) if start < current]
    grace_ago = (at - SEASON_PURGE_GRACE_MS) // ten * ten  # the season current a grace ago
    gone = [start for start in past[keep:] if start < grace_ago] if keep is not None else []
    dropped = purge_seasons(ranking_store, at)  # every board's: earlier examples' boards too
    assert dropped > 0 or not gone
    assert ranking_store.seasons(board, None, 100) == [start for start in reversed(starts) if start not in gone]
    for start in starts:
        got = leaderboard.top(ranking_store, TREE, board, season=start)
        assert got == ({"entries": [], "nextCursor": None, "prevCursor": None} if start in gone else before[start])
        assert leaderboard.describe(ranking_store, TREE, board, start)["players"] == (0 if start in gone else 3)
    assert purge_seasons(ranking_store, at) == 0


def test_one_purge_drops_every_past_season_beyond_those_kept_however_many(ranking_store: RankingStore, log,
                                                                         monkeypatch: pytest.MonkeyPatch):
    """Found from outside: a purge dropped at most 1,000 seasons of a board a run, where a board that
    resets every minute makes 1,440 a day and AWS purges daily: the rest stayed, past keepSeasons."""
    monkeypatch.setattr(ranking_seasons, "SEASONS_A_READ", 2)
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=1))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(period * ten, "p", period, None) for period in range(7)], itertools.count()),
                 ranking_store, log, TREE)
    purge_seasons(ranking_store, T0 + 8 * ten + SEASON_PURGE_GRACE_MS)
    assert ranking_store.seasons(board, None, 100) == [T0 + 6 * ten]


def test_a_deletion_sent_again_with_its_key_deletes_once(ranking_store: RankingStore, log, tmp_path: Path):
    """Found in review: a client that retried DELETE .../players/{playerId} (its first answer lost)
    deleted the record the player made in between. With the request's Idempotency-Key, the retry
    is the same event, applied once."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    ranking_store.put_board(BoardSettings(board, "desc", "set"))
    offsets = itertools.count()
    spill = DirectorySpillStore(tmp_path / "spill")
    consumer = log.consumer("test", SCORES)

    def delete() -> None:
        capture_removal(log, spill, ranking_store.get_board(board), "p", idempotency_key="delete-p-once")
        apply_scores(consumer.poll(10, 1 << 20, 1), ranking_store, log, TREE)

    apply_scores(records(board, [("p", 5)], offsets), ranking_store, log, TREE)
    delete()
    assert ranking_store.scores(board, ["p"]) == {}
    apply_scores(records(board, [("p", 7)], offsets), ranking_store, log, TREE)
    delete()
    assert ranking_store.scores(board, ["p"]) == {"p": 7}


def test_a_key_reused_to_delete_another_player_deletes_only_the_first(ranking_store: RankingStore, log,
                                                                      tmp_path: Path):
    """Found by probing from outside: two DELETEs on one board under one Idempotency-Key, for two
    players, deleted both. As a key reused for scores with another body, the second is set aside
    in the dead letters and its player's record kept (rule 9 of docs/architecture.md)."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    ranking_store.put_board(BoardSettings(board, "desc", "set"))
    apply_scores(records(board, [("p", 5), ("q", 6)], itertools.count()), ranking_store, log, TREE)
    spill = DirectorySpillStore(tmp_path / "spill")
    for player in ("p", "q", "p"):  # the first, another player under its key, the first's retry
        capture_removal(log, spill, ranking_store.get_board(board), player, idempotency_key="k")
    apply_scores(log.consumer("test", SCORES).poll(10, 1 << 20, 1), ranking_store, log, TREE)
    assert ranking_store.scores(board, ["p", "q"]) == {"q": 6}
    [dead] = log.consumer("t", DEADLETTER).poll(10, 1 << 20, timeout_s=0.1)
    assert b'"q"' in dead.value and dict(dead.headers)["reason"].startswith(b"idempotency_conflict")


# how long after a season's end its top is told, in these tests
TELL_AFTER_MS = 10_000
# what an outbox answers that kept no alert yet
NOTHING_TOLD = frozenset[str]().__contains__


def ends_told(store: RankingStore, board: str, at: int) -> list[Alert]:
    """The ends of `board`'s seasons a run at `at` tells, none told before."""
    return [a for a in ended_seasons(store, TREE, at, TELL_AFTER_MS, told=NOTHING_TOLD) if a.body["board"] == board]


def test_a_season_s_end_is_told_with_its_final_top(ranking_store: RankingStore, log):
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, ties="earliest"))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(i, f"p{i}", 100 - i % 3, None) for i in range(12)], itertools.count()),
                 ranking_store, log, TREE)

    # the worker may still apply the season's last updates
    assert ends_told(ranking_store, board, T0 + ten + TELL_AFTER_MS - 1) == []
    (alert,) = ends_told(ranking_store, board, T0 + ten + TELL_AFTER_MS)
    final = leaderboard.top(ranking_store, TREE, board, limit=FINAL_TOP, season=T0)["entries"]
    assert len(final) == FINAL_TOP and [e["rank"] for e in final] == list(range(1, FINAL_TOP + 1))
    assert (alert.key, alert.kind) == (f"season-end:{board}:{T0}", "season-end")
    assert alert.body["top"] == final and alert.body["endedAt"] == to_rfc3339(T0 + ten)
    assert alert.body["text"].endswith(": " + ", ".join(f"{e['rank']}. {e['playerId']} ({e['score']})" for e in final))
    # the next season held no scores: nothing more to tell, then or later
    assert [a for a in ended_seasons(ranking_store, TREE, T0 + 2 * ten + TELL_AFTER_MS, TELL_AFTER_MS,
                                     told={alert.key}.__contains__) if a.body["board"] == board] == []


def test_every_end_within_the_hour_is_told_also_after_a_run_missed_it(ranking_store: RankingStore, log):
    """Found from outside: a run looked only at the season before the current one, so a season
    that ended while no run came (a serve stopped for two minutes, on a board reset every minute)
    was never told."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(0, "a", 5, None), (2 * ten, "b", 7, None), (3 * ten, "c", 1, None)],
                               itertools.count()), ranking_store, log, TREE)
    told = ends_told(ranking_store, board, T0 + 4 * ten + TELL_AFTER_MS)  # the first run in 40 minutes
    assert sorted((a.key, [e["playerId"] for e in a.body["top"]]) for a in told) == [
        (f"season-end:{board}:{T0}", ["a"]), (f"season-end:{board}:{T0 + 2 * ten}", ["b"]),
        (f"season-end:{board}:{T0 + 3 * ten}", ["c"])]
    assert sorted(a.key for a in ends_told(ranking_store, board, T0 + ten + TELL_AFTER_MS + LOOKING_MS + 1)) == [
        a.key for a in sorted(told, key=lambda a: a.key) if a.key != f"season-end:{board}:{T0}"]  # looked at an hour


def test_a_season_that_holds_no_scores_is_not_told(ranking_store: RankingStore, log):
    # found from outside: a delete of a player who had no record there wrote the season's listing,
    # and its end was told, with an empty top; so was a season whose every record was deleted
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(0, "ghost", None, None), (ten, "p", 5, None), (ten + 1, "p", None, None)],
                               itertools.count()), ranking_store, log, TREE)
    assert ends_told(ranking_store, board, T0 + ten + TELL_AFTER_MS) == []
    assert ends_told(ranking_store, board, T0 + 2 * ten + TELL_AFTER_MS) == []


# found in review (stop 29) --------------------------------------------------------------------


class _Spy:
    """The store, with the rows each `following` asked for noted."""

    def __init__(self, store: RankingStore) -> None:
        self._store = store
        self.asked: list[int] = []

    def following(self, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(kwargs["limit"])
        return self._store.following(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("ties", ["shared", "earliest"])
def test_top_at_an_offset_deep_in_a_tie_asks_the_store_for_a_page_not_the_rows_before_it(ranking_store: RankingStore,
                                                                                         log, ties):
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(ties=ties))
    apply_scores(records(board, [(f"q{i:03d}", 0) for i in range(300)], itertools.count()), ranking_store, log, TREE)
    spy = _Spy(ranking_store)
    page = leaderboard.top(spy, TREE, board, offset=250, limit=3)  # type: ignore[arg-type]
    assert [e["playerId"] for e in page["entries"]] == [e["playerId"] for e in leaderboard.top(
        ranking_store, TREE, board, limit=300)["entries"]][250:253]
    assert max(spy.asked) <= 4


@pytest.mark.parametrize("ties", ["shared", "earliest", "subscore"])
def test_an_offset_further_into_one_score_than_a_page_may_skip_is_refused(ranking_store: RankingStore, log, ties,
                                                                           monkeypatch: pytest.MonkeyPatch):
    """Found from outside: a page at an offset deep into the players of one score read every one of
    them before it (MariaDB 495 ms an answer 500,000 players into a tie of score 0): a reader's key
    asking again and again held the database."""
    monkeypatch.setattr(leaderboard, "MAX_TIE_SKIP", 10)
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(ties=ties))
    tied = [(f"q{i:03d}", 0) for i in range(30)]
    apply_scores(records(board, [("a", 7), ("b", 6), ("c", 5), *tied], itertools.count()), ranking_store, log, TREE)
    whole = [e["playerId"] for e in leaderboard.top(ranking_store, TREE, board, limit=100)["entries"]]
    for offset in (2, 3, 13):  # in the score of one, at the tie's first, 10 into it
        page = leaderboard.top(ranking_store, TREE, board, offset=offset, limit=3)
        assert [e["playerId"] for e in page["entries"]] == whole[offset : offset + 3]
    deepest = r"offset 14 is 11 players into those of score 0, .* \(here offset 13\)"
    with pytest.raises(InvalidField, match=deepest) as refused:
        leaderboard.top(ranking_store, TREE, board, offset=14, limit=3)
    assert refused.value.field == "offset"
    # a cursor pages on past it, a page a step
    page = leaderboard.top(ranking_store, TREE, board, offset=13, limit=3)
    after = leaderboard.top(ranking_store, TREE, board, cursor=page["nextCursor"], limit=3)
    assert [e["playerId"] for e in after["entries"]] == whole[16:19]


def test_lifting_a_ban_again_rechecks_what_a_cut_off_lifting_left_hidden(ranking_store: RankingStore, log,
                                                                         tmp_path: Path):
    board = f"b-{uuid.uuid4().hex[:12]}"
    player = f"cheat-{uuid.uuid4().hex[:6]}"
    spill = DirectorySpillStore(tmp_path / "spill")
    consumer = log.consumer("test", SCORES)
    offsets = itertools.count()
    ranking_store.ban(player, T0)
    apply_scores(records(board, [(player, 5)], offsets), ranking_store, log, TREE)
    ranking_store.unban(player)  # the lifting's first try: cut off before its rechecks went out
    assert bans.restore(ranking_store, log, spill, player)["records"] == 1
    apply_scores(consumer.poll(10, 1 << 20, 1), ranking_store, log, TREE)
    assert leaderboard.player(ranking_store, TREE, board, player)["score"] == 5


def test_a_ban_lifted_while_a_batch_writes_its_player_hidden_has_the_batch_tried_again(ranking_store: RankingStore,
                                                                                       log, tmp_path: Path):
    """Found in review: a batch that read the ban list before a lifting and wrote after it kept the
    record the player made meanwhile, on a board it had none on, hidden: the lifting rechecked the
    records it found, and that one was not written yet."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    player = f"cheat-{uuid.uuid4().hex[:6]}"
    spill = DirectorySpillStore(tmp_path / "spill")
    ranking_store.ban(player, T0)
    rechecked: list[int] = []

    class LiftedMeanwhile:
        """The store, the ban lifted between the batch's read of the ban list and its write."""

        def apply(self, *args: Any) -> Any:
            if not rechecked:
                rechecked.append(bans.restore(ranking_store, log, spill, player)["records"])
            return ranking_store.apply(*args)

        def __getattr__(self, name: str) -> Any:
            return getattr(ranking_store, name)

    batch = records(board, [(player, 5)], itertools.count())
    with pytest.raises(BansLifted):
        apply_scores(batch, LiftedMeanwhile(), log, TREE)  # type: ignore[arg-type]
    assert rechecked == [0]
    apply_scores(batch, ranking_store, log, TREE)  # the batch, tried again
    assert leaderboard.player(ranking_store, TREE, board, player)["score"] == 5


def test_settings_left_out_of_a_put_stay_and_an_earliest_board_keeps_its_order(ranking_store: RankingStore):
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(order="asc", operator="set", ties="earliest"))
    leaderboard.configure(ranking_store, board, BoardSettingsBody(keepSeasons=3))
    assert ranking_store.get_board(board) == BoardSettings(board, "asc", "set", ties="earliest", keep_seasons=3)
    with pytest.raises(InvalidField) as refused:  # its tiebreaks are receipt times signed by the order
        leaderboard.configure(ranking_store, board, BoardSettingsBody(order="desc"))
    assert refused.value.field == "order"


def test_a_board_with_seasons_keeps_its_order_so_each_reads_as_it_ended(ranking_store: RankingStore):
    """Found in review: a PUT of another order re-ranked the past seasons of a board wiped or reset,
    which are read in the board's order, and a season ended minutes before was told reversed."""
    wiped, daily, plain = (f"b-{uuid.uuid4().hex[:12]}" for _ in range(3))
    leaderboard.configure(ranking_store, wiped, BoardSettingsBody(order="desc"))
    leaderboard.wipe(ranking_store, wiped)
    leaderboard.configure(ranking_store, daily, BoardSettingsBody(order="desc", reset="daily"))
    for board in (wiped, daily):
        with pytest.raises(InvalidField) as refused:
            leaderboard.configure(ranking_store, board, BoardSettingsBody(order="asc"))
        assert refused.value.field == "order"
        assert leaderboard.configure(ranking_store, board, BoardSettingsBody(order="desc"))[1]["order"] == "desc"
    # one season, the current: its order may change, and a first score's board made desc can be asc
    leaderboard.configure(ranking_store, plain, BoardSettingsBody(order="desc"))
    assert leaderboard.configure(ranking_store, plain, BoardSettingsBody(order="asc"))[1]["order"] == "asc"
    # a window closed: its one season ended, and its end was told as it stood (found in review)
    closed = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, closed, BoardSettingsBody(startsAt=to_rfc3339(now_ms() - 60_000),
                                                                   endsAt=to_rfc3339(now_ms() - 1)))
    with pytest.raises(InvalidField) as refused:
        leaderboard.configure(ranking_store, closed, BoardSettingsBody(order="asc"))
    assert refused.value.field == "order"


class _BoardReadBefore:
    """The store, with a board's settings read as they were before a PUT (None: no board yet) the
    first time they are read: a worker that read them just before the PUT landed."""

    def __init__(self, store: RankingStore, board: str) -> None:
        self._store, self._board, self._stale = store, board, True

    def get_board(self, board: str) -> BoardSettings | None:
        return self.boards_named([board]).get(board)

    def boards_named(self, boards: Sequence[str]) -> dict[str, BoardSettings]:
        found = self._store.boards_named(boards)
        if self._board in found and self._stale:
            self._stale = False
            del found[self._board]
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _ChangedBetween:
    """The store, with another change of a board landing between a PUT's (or a wipe's) read of the
    board's settings and its write: two API workers (or functions) at once."""

    def __init__(self, store: RankingStore, change: Callable[[RankingStore], object]) -> None:
        self._store, self._change = store, change
        self.changes = 0

    def get_board(self, board: str) -> BoardSettings | None:
        found = self._store.get_board(board)
        if self.changes == 0:
            self.changes += 1
            self._change(self._store)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_two_changes_of_a_board_at_once_keep_what_each_sets(ranking_store: RankingStore,
                                                             monkeypatch: pytest.MonkeyPatch):
    """Found from outside: each PUT read the settings, set its fields and wrote them all back, so of
    two at once one undid the other (maxAttempts gone: a tournament's player then made 5 attempts
    of 2); and a PUT undid a wipe that landed between its read and its write."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(order="asc"))
    racing = _ChangedBetween(ranking_store, lambda store: leaderboard.configure(
        store, board, BoardSettingsBody(maxPlayers=100)))
    leaderboard.configure(racing, board, BoardSettingsBody(maxAttempts=2))  # type: ignore[arg-type]
    stored = ranking_store.get_board(board)
    assert stored is not None and (stored.order, stored.max_attempts, stored.max_players) == ("asc", 2, 100)

    monkeypatch.setattr(leaderboard, "EPOCH_DELAY_MS", 0)
    leaderboard.configure(_ChangedBetween(ranking_store, lambda store: leaderboard.wipe(store, board)),  # type: ignore[arg-type]
                          board, BoardSettingsBody(keepSeasons=4))
    stored = ranking_store.get_board(board)
    assert stored is not None and stored.keep_seasons == 4 and stored.epochs  # the wipe's season
    seasons = len(stored.epochs)
    leaderboard.wipe(_ChangedBetween(ranking_store, lambda store: leaderboard.configure(  # type: ignore[arg-type]
        store, board, BoardSettingsBody(maxPlayers=7))), board)
    stored = ranking_store.get_board(board)
    assert stored is not None and stored.max_players == 7 and len(stored.epochs) == seasons + 1


def test_a_board_made_by_a_put_and_by_its_first_scores_at_once_is_one_board(ranking_store: RankingStore, log):
    first = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, first, BoardSettingsBody(ties="earliest"))
    # the worker read "no board" before the PUT: it takes the board the PUT made
    apply_scores(records(first, [("a", 5), ("b", 5)], itertools.count()),
                 _BoardReadBefore(ranking_store, first), log, TREE)  # type: ignore[arg-type]
    assert [e["rank"] for e in leaderboard.top(ranking_store, TREE, first)["entries"]] == [1, 2]
    # the PUT read "no board" before the worker made it, shared: the PUT may not make it another
    second = f"b-{uuid.uuid4().hex[:12]}"
    apply_scores(records(second, [("a", 5)], itertools.count()), ranking_store, log, TREE)
    with pytest.raises(InvalidField):
        leaderboard.configure(_BoardReadBefore(ranking_store, second), second,  # type: ignore[arg-type]
                              BoardSettingsBody(ties="earliest"))
    assert ranking_store.get_board(second).ties == "shared"


def test_the_end_of_a_never_reset_board_s_first_season_is_told_at_its_wipe(ranking_store: RankingStore, log,
                                                                            monkeypatch: pytest.MonkeyPatch):
    board = f"b-{uuid.uuid4().hex[:12]}"
    apply_scores(records(board, [("a", 5)], itertools.count()), ranking_store, log, TREE)
    monkeypatch.setattr(leaderboard, "EPOCH_DELAY_MS", 0)
    leaderboard.wipe(ranking_store, board)
    at = ranking_store.get_board(board).epochs[-1][0]
    (alert,) = [a for a in ended_seasons(ranking_store, TREE, at + TELL_AFTER_MS, TELL_AFTER_MS, told=NOTHING_TOLD)
                if a.body["board"] == board]
    assert alert.key == f"season-end:{board}:0" and [e["playerId"] for e in alert.body["top"]] == ["a"]


@pytest.mark.parametrize("reset", ["never", EVERY_TEN_MINUTES])
def test_a_board_s_end_at_its_ends_at_is_told_with_its_final_top(ranking_store: RankingStore, log, reset: str):
    """Found in review: a board's window closing (its endsAt, as a tournament's) ended its last
    season, but only resets and wipes were told."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    ends = T0 + 3 * 60_000  # within the season that started at T0
    with patch("ranking.leaderboard.now_ms", return_value=T0):  # set while it was still to come
        leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=reset, endsAt=to_rfc3339(ends)))
    apply_scores(timed_records(board, [(0, "a", 5, None), (1, "b", 7, None)], itertools.count()),
                 ranking_store, log, TREE)

    assert ends_told(ranking_store, board, ends + TELL_AFTER_MS - 1) == []
    (alert,) = ends_told(ranking_store, board, ends + TELL_AFTER_MS)
    start = 0 if reset == "never" else T0
    assert alert.key == f"season-end:{board}:{start}" and alert.body["endedAt"] == to_rfc3339(ends)
    assert [e["playerId"] for e in alert.body["top"]] == ["b", "a"]
    # looked at for an hour, then left
    assert ends_told(ranking_store, board, ends + TELL_AFTER_MS + LOOKING_MS + 1) == []


def test_ends_are_told_whatever_newer_seasons_hold(ranking_store: RankingStore, log):
    """Found in review: a run read the seasons holding scores among the newest before it, as many as
    it looked at ends, and seasons newer than those (taken before a window closed behind them)
    filled the count: no end was told."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(n * ten, f"p{n}", n, None) for n in range(6)], itertools.count()),
                 ranking_store, log, TREE)
    with patch("ranking.leaderboard.now_ms", return_value=T0 + 4 * ten):  # closed behind the seasons since
        leaderboard.configure(ranking_store, board, BoardSettingsBody(endsAt=to_rfc3339(T0 + 2 * ten)))
    told = ends_told(ranking_store, board, T0 + 6 * ten + TELL_AFTER_MS)
    assert sorted(a.key for a in told) == [f"season-end:{board}:{T0}", f"season-end:{board}:{T0 + ten}"]


class _CountedAsks:
    """An issue store that counts the outbox's answers asked of it."""

    def __init__(self, store: SqliteIssueStore) -> None:
        self._store, self.asked = store, 0

    def raised(self, key: str) -> bool:
        self.asked += 1
        return self._store.raised(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_end_told_is_not_asked_of_the_outbox_again(ranking_store: RankingStore, log, tmp_path: Path):
    """Found in review: each run asked the outbox of each end of the hour whether it was told, some
    60 a run for a board reset every minute, every 10 s under serve (in AWS, before the webhooks'
    delivery, within its function's timeout)."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(n * ten, f"p{n}", n, None) for n in range(4)], itertools.count()),
                 ranking_store, log, TREE)
    issues = _CountedAsks(SqliteIssueStore(SqliteIndexDatabase(tmp_path / "index.sqlite")))
    at = T0 + 4 * ten + TELL_AFTER_MS
    policy = SeasonEndPolicy(after_s=TELL_AFTER_MS / 1000)
    assert tell_season_ends(ranking_store, issues, TREE, policy, at) >= 4  # type: ignore[arg-type]
    issues.asked = 0
    assert tell_season_ends(ranking_store, issues, TREE, policy, at) == 0  # type: ignore[arg-type]
    assert issues.asked == 0


def test_a_window_that_closed_is_not_opened_again(ranking_store: RankingStore):
    """Found from outside: a board's endsAt moved later after its end was told: the end it then had
    was never told (the alert's key, the board and season, was taken), and the told top was stale."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    closed = to_rfc3339(now_ms() - 60_000)
    leaderboard.configure(ranking_store, board, BoardSettingsBody(endsAt=closed))
    for later in (to_rfc3339(now_ms() + 60_000), to_rfc3339(now_ms() - 30_000), None):
        with pytest.raises(InvalidField) as refused:
            leaderboard.configure(ranking_store, board, BoardSettingsBody(endsAt=later))
        assert refused.value.field == "endsAt"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(endsAt=closed, keepSeasons=2))  # as it is: taken
    assert ranking_store.get_board(board).keep_seasons == 2


def test_an_end_set_too_far_back_to_be_told_is_refused(ranking_store: RankingStore):
    """Found from outside: an endsAt three hours past was taken, and its season's end was never told
    (the job looks at an end for an hour after its wait), where the contract tells each end once."""
    board, now = f"b-{uuid.uuid4().hex[:12]}", now_ms()
    leaderboard.configure(ranking_store, board, BoardSettingsBody(keepSeasons=3))
    # on a new board and on one made before
    for named, ends in ((f"{board}-new", now - 3 * 3_600_000), (f"{board}-new", now - 31 * 60_000),
                        (board, now - 3 * 3_600_000)):
        with pytest.raises(InvalidField) as refused:
            leaderboard.configure(ranking_store, named, BoardSettingsBody(endsAt=to_rfc3339(ends)))
        assert refused.value.field == "endsAt" and "to close it now" in refused.value.message
    assert ranking_store.get_board(f"{board}-new") is None
    # a clock behind, or a board closed as of now: taken, and told (tests above)
    leaderboard.configure(ranking_store, board, BoardSettingsBody(endsAt=to_rfc3339(now - 29 * 60_000)))
    # set while it was to come, the same end again is as it is, however far back it is now
    with patch("ranking.leaderboard.now_ms", return_value=T0):
        leaderboard.configure(ranking_store, f"{board}-old", BoardSettingsBody(endsAt=to_rfc3339(T0 + 60_000)))
    assert leaderboard.configure(ranking_store, f"{board}-old", BoardSettingsBody(
        endsAt=to_rfc3339(T0 + 60_000), keepSeasons=2))[1]["keepSeasons"] == 2


def test_a_season_end_told_before_is_not_read_again(ranking_store: RankingStore, log):
    """Found in review: within the hour a run looks at an end, every run (each 10 s under serve)
    read the final top again, only for the outbox to drop the alert as a duplicate."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    apply_scores(timed_records(board, [(0, "a", 5, None)], itertools.count()), ranking_store, log, TREE)
    at = T0 + PERIODS[EVERY_TEN_MINUTES] + TELL_AFTER_MS
    spy = _Spy(ranking_store)
    first = ended_seasons(spy, TREE, at, TELL_AFTER_MS, told=NOTHING_TOLD)  # type: ignore[arg-type]
    assert len([a for a in first if a.body["board"] == board]) == 1 and spy.asked
    spy.asked.clear()
    told = {a.key for a in first}  # the other boards' ends in this store too
    assert [a for a in ended_seasons(spy, TREE, at, TELL_AFTER_MS, told=told.__contains__)  # type: ignore[arg-type]
            if a.body["board"] == board] == []
    assert spy.asked == []  # the top of a told end is not read


def test_retention_leaves_a_season_that_just_ended_to_its_worker(ranking_store: RankingStore, log):
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=0))
    apply_scores(timed_records(board, [(0, "a", 1, None)], itertools.count()), ranking_store, log, TREE)
    ended = T0 + PERIODS[EVERY_TEN_MINUTES]
    purge_seasons(ranking_store, ended + 1)  # a late update of it may still be on its way
    assert ranking_store.seasons(board, None, 10) == [T0]
    purge_seasons(ranking_store, ended + SEASON_PURGE_GRACE_MS)
    assert ranking_store.seasons(board, None, 10) == []


def test_a_late_update_landing_as_retention_drops_its_season_is_dropped_by_the_next_purge(
        ranking_store: RankingStore, log, monkeypatch: pytest.MonkeyPatch):
    """Found in review: the purge deleted a season's rows, then its listing; a late update (a ban's
    recheck, a replayed spill) written between the two was left with no listing, which no purge
    could find again, and stayed readable. The listing goes in one transaction with what came
    since; and a purge cut off midway leaves the season listed, for the next."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=0))
    offsets = itertools.count()
    apply_scores(timed_records(board, [(0, f"p{i}", i, None) for i in range(3)], offsets), ranking_store, log, TREE)
    database = ranking_store._database  # type: ignore[attr-defined]
    deleting = database.delete_in_chunks
    late: list[int] = []

    def then_a_late_update(statement: Any, values: Any) -> int:
        deleted: int = deleting(statement, values)
        if not late:  # the season's records deleted, its trees not yet
            late.append(apply_scores(timed_records(board, [(60_000, "late", 9, None)], offsets), ranking_store, log,
                                     TREE))
        return deleted

    monkeypatch.setattr(database, "delete_in_chunks", then_a_late_update)
    after = T0 + PERIODS[EVERY_TEN_MINUTES] + SEASON_PURGE_GRACE_MS
    purge_seasons(ranking_store, after)
    monkeypatch.undo()
    assert late == [1]
    assert ranking_store.seasons(board, None, 10) == []
    assert ranking_store.records(season_key(board, T0), ["late", "p0"]) == {}
    # a purge cut off midway (its process killed)
    apply_scores(timed_records(board, [(120_000, "later", 9, None)], offsets), ranking_store, log, TREE)

    def cut_off(statement: Any, values: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(database, "delete_in_chunks", cut_off)
    with pytest.raises(KeyboardInterrupt):
        purge_seasons(ranking_store, after)
    monkeypatch.undo()
    assert ranking_store.seasons(board, None, 10) == [T0]
    purge_seasons(ranking_store, after)
    assert ranking_store.seasons(board, None, 10) == []
    assert ranking_store.records(season_key(board, T0), ["late", "later", "p0"]) == {}
    with pytest.raises(NotFound):
        leaderboard.around(ranking_store, TREE, board, "late", season=T0)


def test_retention_leaves_a_season_whose_end_may_still_be_told(ranking_store: RankingStore, log):
    """Found from outside: the teller looks at an end for LOOKING_MS once `after_s` has passed, so a
    serve stopped for the hour after an end still tells it when it starts again; but a purge run
    first (both run as a serve starts) had dropped the season an hour after its end: never told."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=0))
    apply_scores(timed_records(board, [(0, "a", 5, None)], itertools.count()), ranking_store, log, TREE)
    after_ms = round(MAX_AFTER_S * 1000)
    last_look = T0 + PERIODS[EVERY_TEN_MINUTES] + after_ms + LOOKING_MS
    purge_seasons(ranking_store, last_look)
    told = ended_seasons(ranking_store, TREE, last_look, after_ms, told=NOTHING_TOLD)
    assert [a.body["top"][0]["playerId"] for a in told if a.body["board"] == board] == ["a"]


def test_tie_counts_are_read_for_the_nodes_asked(ranking_store: RankingStore):
    """What the worker reads of a tie tree's floor: each node asked, by (score, level, prefix), with
    its count; nodes without one (never written, or back to 0) left out, and more nodes than a
    statement binds read in several."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    written = {(score, level, prefix): 1 + prefix % 5 for score in (-1, 7) for level in (0, 3)
               for prefix in range(-150, 150, 2)}
    ranking_store.apply(Checkpoint("c", "r-0", -1, 0), [BoardUpdate(BoardSettings(board, ties="earliest"), {}, {},
                                                                    tie_deltas=written)])
    ranking_store.apply(Checkpoint("c", "r-0", 0, 1), [BoardUpdate(BoardSettings(board, ties="earliest"), {}, {},
                                                                   tie_deltas={(7, 3, 0): -1})])
    asked = [(score, level, prefix) for score in (-1, 7, 8) for level in (0, 1, 3) for prefix in range(-151, 151, 3)]
    expected = {node: count for node, count in written.items() if node in asked and node != (7, 3, 0)}
    assert ranking_store.tie_counts(board, asked) == expected
    assert ranking_store.tie_counts(board, []) == {}


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_better_tiebreaks_of_a_score_are_counted_to_a_bound(ranking_store: RankingStore, log, order):
    """What a rank reads of a tie before its tree, or of a node of its tree's floor: each key's
    players of the score with a better tiebreak, and one no better than the key's bound, counted to
    at most the limit asked; a tiebreak outside every one counts all or none."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(order=order, operator="set", ties="subscore"))
    players = [(f"p{n:02d}", n % 2, n // 3) for n in range(40)]  # scores 0 and 1, subscores shared by some
    apply_scores(timed_records(board, [(n, p, score, None, sub) for n, (p, score, sub) in enumerate(players)],
                               itertools.count()), ranking_store, log, TREE)
    subscores = (INT64_MIN, -1, 0, 5, 6, 13, 14, INT64_MAX)
    keys = [(score, sub, bound) for score in (0, 1, 2) for sub in subscores
            for bound in (INT64_MIN, 0, 5, 13, INT64_MAX, sub)]
    for at_most in (1, 4, 64):
        expected = [min(at_most, sum(s == score and (sub < t <= bound if order == "desc" else bound <= t < sub)
                                     for _, s, t in players))
                    for score, sub, bound in keys]
        assert ranking_store.better_tied(board, order, keys, at_most) == expected


def test_a_tie_tree_left_by_a_lower_threshold_is_rebuilt_when_its_score_grows_to_it(ranking_store: RankingStore, log,
                                                                                    monkeypatch):
    """Trees written while ties of two had them, then left unread by a higher TIE_TREE_FROM and
    gone stale as players left and joined, are cleared when the score's tie reaches the threshold,
    and built again from its players: every rank stays exact."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(ties="earliest"))
    brute = BruteBoard("desc", "best", "earliest")
    offsets = itertools.count()

    def send(stream: list[tuple[int, str, int]]) -> None:
        apply_scores(timed_records(board, [(at, p, value, None) for at, p, value in stream], offsets), ranking_store,
                     log, TREE)
        for at, player, value in stream:
            brute.apply(player, value, at=T0 + at)

    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", 2)
    send([(n, player, 5) for n, player in enumerate("abcde")])  # a tie tree of five
    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", 6)
    send([(10, "a", 9), (11, "b", 9), (12, "f", 5)])  # four left at 5: the tree is left as it was
    send([(20, "g", 5), (21, "h", 5), (22, "i", 5)])  # seven: a tree of them, in place of the stale one
    expected = brute.ordered()
    assert [e["playerId"] for e in expected] == ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
    for entry in expected:
        assert leaderboard.player(ranking_store, TREE, board, entry["playerId"]) == entry
    assert leaderboard.ranks_of(ranking_store, TREE, board, list("ihgfedcba"))["entries"] == expected


def _banned(ranking_store: RankingStore, log, board: str, player: str, offsets: itertools.count) -> None:
    """Bans the player, and applies the rechecks the ban asks of its boards."""
    ranking_store.ban(player, T0)
    outgoing, _ = bans.rechecks(ranking_store, player)
    apply_scores([LogRecord(f"scores.{board}", 0, next(offsets), r.value, r.key, (), 0) for r in outgoing],
                 ranking_store, log, TREE)


def test_a_banned_player_is_not_counted_ahead_of_those_of_its_score(ranking_store: RankingStore, log):
    """A banned player leaves the ranks of those it tied with: not counted as a better tiebreak,
    nor as the same tiebreak with a smaller playerId."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    a, b, c = (f"{board}-{name}" for name in "abc")
    leaderboard.configure(ranking_store, board, BoardSettingsBody(ties="subscore"))
    offsets = itertools.count()
    apply_scores(timed_records(board, [(0, a, 5, None, 2), (0, b, 5, None, 1), (0, c, 5, None, 1)], offsets),
                 ranking_store, log, TREE)
    for player in (a, b):  # a's subscore is better than c's; b's is c's, and b < c
        _banned(ranking_store, log, board, player, offsets)
    expected = {"rank": 1, "playerId": c, "score": 5, "subscore": 1, "metadata": None}
    assert leaderboard.player(ranking_store, TREE, board, c) == expected
    assert leaderboard.top(ranking_store, TREE, board)["entries"] == [expected]
    assert leaderboard.around(ranking_store, TREE, board, c)["entries"] == [expected]


def test_a_tie_tree_built_while_a_banned_player_holds_its_score_counts_only_those_shown(
        ranking_store: RankingStore, log, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(ranking_ties, "TIE_TREE_FROM", 2)
    board = f"b-{uuid.uuid4().hex[:12]}"
    a, b, c = (f"{board}-{name}" for name in "abc")
    leaderboard.configure(ranking_store, board, BoardSettingsBody(ties="subscore"))
    offsets = itertools.count()
    apply_scores(timed_records(board, [(0, a, 5, None, 9), (0, b, 5, None, 2)], offsets), ranking_store, log, TREE)
    _banned(ranking_store, log, board, a, offsets)  # b alone is shown: its score's tree goes
    # two shown again: the tree is built from the records at the score, a's hidden one not among them
    apply_scores(timed_records(board, [(1, c, 5, None, 3)], offsets), ranking_store, log, TREE)
    assert [(e["playerId"], e["rank"]) for e in leaderboard.top(ranking_store, TREE, board)["entries"]] == \
        [(c, 1), (b, 2)]
    assert leaderboard.player(ranking_store, TREE, board, c)["rank"] == 1
    assert leaderboard.rank_for_score(ranking_store, TREE, board, 5, subscore=4)["rank"] == 1


def test_retention_keeps_a_season_until_a_grace_after_its_end(ranking_store: RankingStore, log):
    """The season current a grace ago has not ended a grace ago: kept to the millisecond."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES, keepSeasons=0))
    apply_scores(timed_records(board, [(0, "a", 1, None)], itertools.count()), ranking_store, log, TREE)
    ended = T0 + PERIODS[EVERY_TEN_MINUTES]
    purge_seasons(ranking_store, ended + SEASON_PURGE_GRACE_MS - 1)
    assert ranking_store.seasons(board, None, 10) == [T0]
    purge_seasons(ranking_store, ended + SEASON_PURGE_GRACE_MS)
    assert ranking_store.seasons(board, None, 10) == []


def test_a_recheck_is_keyed_by_its_board_whatever_the_season(ranking_store: RankingStore, log):
    """The `scores` topic is keyed by board, so that one worker applies a board's updates in order:
    a recheck of a season's record goes to that board's partition too."""
    board = f"b-{uuid.uuid4().hex[:12]}"
    player = f"{board}-p"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(0, player, 1, None), (ten, player, 2, None)], itertools.count()),
                 ranking_store, log, TREE)
    outgoing, count = bans.rechecks(ranking_store, player)
    assert count == 2
    assert [r.key for r in outgoing] == [board.encode()]


def _listed(page_of: Callable[[str | None], tuple[list[str], str | None]], pages: int) -> list[str]:
    """What a listing's pages hold, cursor after cursor, `pages` of them at most."""
    listed: list[str] = []
    cursor = None
    for _ in range(pages):
        items, cursor = page_of(cursor)
        listed += items
        if cursor is None:
            break
    return listed


def test_a_board_s_seasons_page_by_cursor_each_once(ranking_store: RankingStore, log):
    board = f"b-{uuid.uuid4().hex[:12]}"
    leaderboard.configure(ranking_store, board, BoardSettingsBody(reset=EVERY_TEN_MINUTES))
    ten = PERIODS[EVERY_TEN_MINUTES]
    apply_scores(timed_records(board, [(period * ten, "p", period, None) for period in range(3)], itertools.count()),
                 ranking_store, log, TREE)

    def page_of(cursor: str | None) -> tuple[list[str], str | None]:
        page = leaderboard.seasons(ranking_store, board, limit=2, cursor=cursor)
        return page["seasons"], page["nextCursor"]

    assert _listed(page_of, 5) == [to_rfc3339(T0 + period * ten) for period in (2, 1, 0)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(listed=st.sets(st.integers(0, 11), max_size=4), asked=st.lists(st.integers(0, 11), max_size=24),
       whole_from=WHOLE_BAN_LISTS_FROM)
def test_the_players_asked_about_are_found_on_the_ban_list_as_it_is(ranking_store: RankingStore, monkeypatch,
                                                                      listed, asked, whole_from):
    """Whether the list is read whole (it holds at most a quarter as many players as those asked
    about, and they are many) or by the players' ids, the answer is those of them on it, with when
    they were banned; a list found longer is then read by the ids for a while."""
    monkeypatch.setattr(ranking_store, "WHOLE_BAN_LIST_FROM", whole_from)
    monkeypatch.setattr(ranking_store, "_long_ban_list_until", 0.0)
    players = [f"listed-{i}" for i in range(12)]
    for i, player in enumerate(players):
        ranking_store.ban(player, T0 + i) if i in listed else ranking_store.unban(player)
    whole: list[int] = []
    bans_of = ranking_store.bans
    monkeypatch.setattr(ranking_store, "bans", lambda after, limit: whole.append(limit) or bans_of(after, limit))
    expected = {players[i]: T0 + i for i in asked if i in listed}
    for _ in range(2):
        assert ranking_store.banned([players[i] for i in asked]) == expected
    many, room = len(asked) >= whole_from, len(asked) // 4
    assert whole == ([room + 1] * (1 if len(listed) > room else 2) if many else [])


def test_the_ban_list_pages_by_cursor_each_player_once(ranking_store: RankingStore):
    players = [f"ban-{i}" for i in range(3)]
    for player in players:
        ranking_store.ban(player, T0)

    def page_of(cursor: str | None) -> tuple[list[str], str | None]:
        page = bans.bans(ranking_store, limit=2, cursor=cursor)
        return [b["playerId"] for b in page["bans"]], page["nextCursor"]

    assert _listed(page_of, 10) == players  # each test has a store of its own
