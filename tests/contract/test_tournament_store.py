"""Tournaments against brute force, on both storages: random attempts (several players and
seasons, retries of an event id with its body and with another, the window open or shut) must
each be decided as a plain model decides them, and leave the counts it has; attempts that race for
a season's last slot are decided one at a time; and a tournament board's scores reach its top only
as attempts, within its window, once each however often they are retried."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded.log import SqliteEventLog
from adapters.spill.directory import DirectorySpillStore
from pipeline.topics import SCORES
from ports import Attempt, Attempted, RankingStore
from ports.errors import AttemptsExhausted, IdempotencyConflict, NotATournament, TournamentClosed, TournamentFull
from ports.timeutil import now_ms, parse_epoch_ms, to_rfc3339
from ranking import leaderboard, tournaments
from ranking.capture import capture_scores
from ranking.model import AttemptBody, BoardSettingsBody, Score
from ranking.seasons import SEASON_PURGE_GRACE_MS, purge_seasons, season_key, season_start
from ranking.worker import apply_scores
from tests.contract.test_ranking_store import EVERY_TEN_MINUTES, PERIODS, TREE

PLAYERS = ["p0", "p1", "p2", "p3"]
KEYS = ["k0", "k1", "k2"]


@pytest.fixture
def log(tmp_path: Path):
    log = SqliteEventLog(tmp_path / "log.sqlite")
    yield log
    log.close()


@dataclass
class BruteTournament:
    """The rules of ports.TournamentStore.attempt, on dictionaries."""

    max_attempts: int | None
    max_players: int | None
    made: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    kept: dict[str, tuple[str, int, int, str]] = field(default_factory=dict)

    def attempt(self, a: Attempt) -> Attempted:
        if a.body_hash is not None and a.event_id in self.kept:
            key, attempt, received_at, digest = self.kept[a.event_id]
            return Attempted("retried" if digest == a.body_hash else "conflict", key, attempt, received_at)
        if not a.open:
            return Attempted("closed")
        season = self.made[a.key]
        made = season.get(a.player_id, 0)
        if self.max_attempts is not None and made >= self.max_attempts:
            return Attempted("exhausted", a.key, made)
        if not made and self.max_players is not None and len(season) >= self.max_players:
            return Attempted("full", a.key)
        season[a.player_id] = made + 1
        if a.body_hash is not None:
            self.kept[a.event_id] = (a.key, made + 1, a.received_at, a.body_hash)
        return Attempted("recorded", a.key, made + 1, a.received_at)


# (season, player, the Idempotency-Key or None, the score sent, the window open)
attempts = st.lists(st.tuples(st.integers(0, 1), st.sampled_from(PLAYERS), st.none() | st.sampled_from(KEYS),
                              st.integers(0, 1), st.booleans()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_attempts=st.none() | st.integers(1, 3), max_players=st.none() | st.integers(1, 3), stream=attempts)
def test_attempts_are_decided_as_brute_force(ranking_store: RankingStore, max_attempts, max_players, stream):
    board = f"t-{uuid.uuid4().hex[:12]}"  # a fresh board per example: event ids are kept across examples
    brute = BruteTournament(max_attempts, max_players)
    seasons = [season_key(board, None), season_key(board, 1_000)]
    for at, (season, player, key, score, is_open) in enumerate(stream):
        event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{board}/{key}")) if key else str(uuid.uuid4())
        digest = hashlib.sha256(f"{player}:{score}".encode()).hexdigest() if key else None
        attempt = Attempt(seasons[season], player, event_id, digest, at, is_open, max_attempts, max_players)
        assert ranking_store.attempt(attempt) == brute.attempt(attempt), (at, attempt)
    for key in seasons:
        assert ranking_store.attempts(key, PLAYERS) == brute.made[key]
        assert ranking_store.entrants(key) == len(brute.made[key])


@pytest.mark.parametrize("limit", ["attempts", "players", "retries", "retries across a reset"])
def test_attempts_racing_for_the_last_slot_take_it_once(ranking_store: RankingStore, limit):
    """Eight requests at once for the season's last attempt (one player), its last place (eight
    players), or eight sends of one attempt (its Idempotency-Key), also when they straddle a reset
    (each holds another season's lock): exactly one is counted, whichever engine holds the lock."""
    key = f"t-{uuid.uuid4().hex[:12]}"
    seasons = [key, f"{key}'"] if limit == "retries across a reset" else [key]
    racers = 8
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []
    retried = str(uuid.uuid5(uuid.NAMESPACE_URL, key))

    def race(i: int) -> None:
        player = f"p{i}" if limit == "players" else "p"
        event_id, digest = (retried, "same body") if limit.startswith("retries") else (str(uuid.uuid4()), None)
        attempt = Attempt(seasons[i % len(seasons)], player, event_id, digest, i, True,
                          1 if limit == "attempts" else None, 1 if limit == "players" else None)
        barrier.wait()
        outcomes.append(ranking_store.attempt(attempt).outcome)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refused = {"attempts": "exhausted", "players": "full"}.get(limit, "retried")
    assert sorted(outcomes) == sorted(["recorded"] + [refused] * (racers - 1))
    assert sum(ranking_store.entrants(season) for season in seasons) == 1
    players = ["p", *(f"p{i}" for i in range(racers))]
    assert sum(sum(ranking_store.attempts(season, players).values()) for season in seasons) == 1


class Tournament:
    """A tournament board with its log, and its worker applying what was published."""

    def __init__(self, store: RankingStore, log: SqliteEventLog, tmp_path: Path, **board: Any) -> None:
        self.store, self.log = store, log
        self.spill = DirectorySpillStore(tmp_path / "spill")
        self.board = f"t-{uuid.uuid4().hex[:12]}"
        leaderboard.configure(store, self.board, BoardSettingsBody(**board))
        self._consumer = log.consumer(f"test-{self.board}", SCORES)

    def attempt(self, player: str, score: int, key: str | None = None) -> dict[str, Any]:
        settings = leaderboard.settings_of(self.store, self.board)
        receipt = tournaments.attempt(self.store, self.log, self.spill, settings,
                                      AttemptBody(playerId=player, score=score), idempotency_key=key)
        return dict(receipt)

    def work(self) -> dict[str, int]:
        """Applies what was published (`applied`: how many updates the worker says it applied);
        the board's scores."""
        self.applied = apply_scores(self._consumer.poll(100, 1 << 20, 1), self.store, self.log, TREE)
        return {e["playerId"]: e["score"] for e in leaderboard.top(self.store, TREE, self.board, limit=100)["entries"]}


def test_a_tournament_takes_its_scores_only_as_attempts_within_its_limits(ranking_store: RankingStore, log,
                                                                         tmp_path: Path):
    t = Tournament(ranking_store, log, tmp_path, operator="incr", maxAttempts=2, maxPlayers=2)
    assert t.attempt("a", 5, "a-1") == {"board": t.board, "playerId": "a", "season": None, "attempt": 1,
                                        "attemptsLeft": 1}
    # a retry (its answer lost): the same answer, counted and applied once (incr would add twice)
    assert t.attempt("a", 5, "a-1")["attempt"] == 1
    with pytest.raises(IdempotencyConflict):
        t.attempt("a", 6, "a-1")
    assert t.attempt("a", 7)["attemptsLeft"] == 0
    with pytest.raises(AttemptsExhausted):
        t.attempt("a", 100)
    assert t.attempt("a", 5, "a-1")["attempt"] == 1  # a retry is still answered once exhausted
    # the first answer, what it left counted against the limit now (found from outside: the
    # contract had said the first answer, whole, which no row keeps once the limit changed)
    leaderboard.configure(ranking_store, t.board, BoardSettingsBody(operator="incr", maxAttempts=10, maxPlayers=2))
    assert (t.attempt("a", 5, "a-1")["attempt"], t.attempt("a", 5, "a-1")["attemptsLeft"]) == (1, 9)
    t.attempt("b", 1)
    with pytest.raises(TournamentFull):
        t.attempt("c", 1)
    # a plain update to a tournament board is taken by capture but never applied
    capture_scores(log, t.spill, [Score(board=t.board, playerId="a", score=1000)])
    capture_scores(log, t.spill, [Score(board=t.board, playerId="z", score=1000)])
    assert t.work() == {"a": 12, "b": 1}
    assert t.applied == 3  # found in review: the plain updates passed over were counted as applied
    assert ranking_store.attempts(season_key(t.board, None), ["a", "b", "c"]) == {"a": 2, "b": 1}


def test_a_board_takes_no_score_outside_its_window(ranking_store: RankingStore, log, tmp_path: Path):
    t = Tournament(ranking_store, log, tmp_path, maxAttempts=3, startsAt="2000-01-01T00:00:00Z",
                   endsAt="2100-01-01T00:00:00Z")
    t.attempt("a", 5, "a-1")
    assert t.work() == {"a": 5}
    leaderboard.configure(ranking_store, t.board, BoardSettingsBody(endsAt=to_rfc3339(now_ms())))
    with pytest.raises(TournamentClosed):
        t.attempt("a", 9)
    assert t.attempt("a", 5, "a-1")["attempt"] == 1  # a retry of an attempt counted in the window
    # and a plain board's window, applied by the worker (the update's receipt time)
    capture_scores(log, t.spill, [Score(board="open-board", playerId="a", score=1)])
    leaderboard.configure(ranking_store, "shut-board", BoardSettingsBody(startsAt="2100-01-01T00:00:00Z"))
    capture_scores(log, t.spill, [Score(board="shut-board", playerId="a", score=1)])
    t.work()
    assert ranking_store.scores("open-board", ["a"]) == {"a": 1}
    assert ranking_store.scores("shut-board", ["a"]) == {}


def test_a_board_without_limits_takes_no_attempt(ranking_store: RankingStore, log, tmp_path: Path):
    t = Tournament(ranking_store, log, tmp_path, startsAt="2000-01-01T00:00:00Z")
    with pytest.raises(NotATournament):
        t.attempt("a", 1)


def test_an_attempt_retried_after_its_limits_were_lifted_is_answered_as_its_retry(ranking_store: RankingStore,
                                                                                 log, tmp_path: Path):
    """Found from outside: an attempt counted whose publish failed (or whose answer was lost) was
    refused 409 not_a_tournament when retried after the board's limits were lifted, and its score
    was never published."""
    t = Tournament(ranking_store, log, tmp_path, maxAttempts=3)
    t.attempt("a", 5, "a-1")
    leaderboard.configure(ranking_store, t.board, BoardSettingsBody(maxAttempts=None))
    assert t.attempt("a", 5, "a-1")["attempt"] == 1
    with pytest.raises(IdempotencyConflict):
        t.attempt("a", 6, "a-1")
    for key in (None, "a-2"):  # a new attempt, kept or not, is no retry
        with pytest.raises(NotATournament):
            t.attempt("a", 7, key)
    published = log.consumer(f"count-{t.board}", SCORES).poll(100, 1 << 20, 1)
    assert len([r for r in published if r.key == t.board.encode()]) == 2  # the first, and the retry's
    assert t.work() == {"a": 5}


def test_retention_drops_a_purged_season_s_attempts_with_it(ranking_store: RankingStore, log, tmp_path: Path):
    t = Tournament(ranking_store, log, tmp_path, reset=EVERY_TEN_MINUTES, keepSeasons=0, maxAttempts=2)
    season = t.attempt("a", 5, "a-1")["season"]
    assert t.work() == {"a": 5}
    key = season_key(t.board, parse_epoch_ms(season))
    assert (ranking_store.attempts(key, ["a"]), ranking_store.entrants(key)) == ({"a": 1}, 1)
    # two seasons on, a grace after: the season is past, beyond the none kept
    assert purge_seasons(ranking_store, now_ms() + 2 * PERIODS[EVERY_TEN_MINUTES] + SEASON_PURGE_GRACE_MS) > 0
    assert (ranking_store.attempts(key, ["a"]), ranking_store.entrants(key)) == ({}, 0)
    t.attempt("a", 5, "a-1")  # its kept event went too: sent again (in that season, here), it counts anew
    assert ranking_store.attempts(key, ["a"]) == {"a": 1}


def test_an_attempt_at_a_closed_tournament_leaves_no_season_behind(ranking_store: RankingStore, log,
                                                                    tmp_path: Path):
    """Found in review: an attempt refused as closed opened its season's row first, and a season
    no score reached is never listed, so retention never dropped that row."""
    t = Tournament(ranking_store, log, tmp_path, reset=EVERY_TEN_MINUTES, maxAttempts=1,
                   startsAt="2999-01-01T00:00:00Z")
    with pytest.raises(TournamentClosed):
        t.attempt("a", 5, "a-1")
    start = season_start(EVERY_TEN_MINUTES, now_ms())
    assert start is not None and ranking_store.drop_season(t.board, start) == 0
