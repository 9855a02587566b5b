"""Tournament attempts on SQLite and MySQL alike (ports.TournamentStore): each season's row in
tournament_seasons is its lock, taken FOR UPDATE on MySQL (SQLite's write transaction holds the
whole file), so attempts that race for a season's last slot are decided one after the other; what
else an attempt reads and writes of the season is only ever written under that lock."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import sqlalchemy as sa

from adapters.sql.reads import SqlDatabase, Transaction
from adapters.sql.schema import tournament_attempts, tournament_players, tournament_seasons
from adapters.sql.statements import Query, Statement, insert, listed, marks, padded
from ports import Attempt, Attempted

_bind = sa.bindparam
_s, _p, _a = tournament_seasons.c, tournament_players.c, tournament_attempts.c
OPEN_SEASON = insert(tournament_seasons, ("board", "players"), keys=("board",))
_players = sa.select(_s.players).where(_s.board == _bind("board"))
ENTRANTS = Statement(_players)
LOCK_SEASON = Statement(_players.with_for_update())
COUNT_PLAYER = Statement(sa.update(tournament_seasons).where(_s.board == _bind("board"))
                         .values(players=_s.players + 1))
# plain reads, under the season's lock: on MySQL, a locking read of a row that is not there would
# lock the gap it would go in, where another season's attempt may insert (a deadlock)
KEPT = Statement(sa.select(_a.board, _a.attempt, _a.received_at, _a.body_hash).where(_a.event_id == _bind("event_id")))
_player = (_p.board == _bind("board"), _p.player_id == _bind("player"))
PLAYER = Statement(sa.select(_p.attempts).where(*_player))
NEW_PLAYER = insert(tournament_players, ("board", "player_id", "attempts"))
ANOTHER_ATTEMPT = Statement(sa.update(tournament_players).where(*_player).values(attempts=_p.attempts + 1))
KEEP = insert(tournament_attempts, ("event_id", "board", "player_id", "attempt", "received_at", "body_hash"),
              keys=("event_id",))


class _Raced(Exception):
    """Another send of the event kept it first, under another season's lock: one sent as the
    season reset, its retry after."""


# within SQLite's bound values a statement (999 before 3.32), as the ranking reads
_PLAYERS_AT_ONCE = 500


@functools.cache
def _attempts(count: int) -> Statement:
    return Statement(sa.select(_p.player_id, _p.attempts).where(_p.board == _bind("board"),
                                                                _p.player_id.in_(marks("player", count))))


def attempts_query(key: str, player_ids: list[str]) -> Query:
    return _attempts(padded(len(player_ids))), {"board": key, **listed("player", player_ids)}


def _decide(t: Transaction, a: Attempt, players: int) -> Attempted:
    """The attempt, with the season locked (it has `players` players)."""
    if a.body_hash is not None:
        kept = t.rows(KEPT, {"event_id": a.event_id})
        if kept:
            key, attempt, received_at, body_hash = kept[0]
            return Attempted("retried" if body_hash == a.body_hash else "conflict", str(key), int(attempt),
                             int(received_at))
    if not a.open:
        return Attempted("closed")
    found = t.rows(PLAYER, {"board": a.key, "player": a.player_id})
    made = int(found[0][0]) if found else 0
    if a.max_attempts is not None and made >= a.max_attempts:
        return Attempted("exhausted", a.key, made)
    if found:
        t.execute(ANOTHER_ATTEMPT, {"board": a.key, "player": a.player_id})
    elif a.max_players is not None and players >= a.max_players:
        return Attempted("full", a.key)
    else:
        t.execute(COUNT_PLAYER, {"board": a.key})
        t.execute(NEW_PLAYER, {"board": a.key, "player_id": a.player_id, "attempts": 1})
    if a.body_hash is not None and not t.execute(KEEP, {
            "event_id": a.event_id, "board": a.key, "player_id": a.player_id, "attempt": made + 1,
            "received_at": a.received_at, "body_hash": a.body_hash}):
        raise _Raced
    return Attempted("recorded", a.key, made + 1, a.received_at)


class TournamentRecords:
    _database: SqlDatabase

    def attempt(self, attempt: Attempt) -> Attempted:
        try:
            return self._decided(attempt)
        except _Raced:
            # rolled back: the other's event is committed now, and answers this one as its retry
            return self._decided(attempt)

    def _decided(self, attempt: Attempt) -> Attempted:
        decided = self._locked(attempt)
        if decided is None and not attempt.open:
            # nothing to count, so no season row: retention finds a season by its scores only
            with self._database.transaction() as t:
                return _decide(t, attempt, 0)
        if decided is None:
            # the season's first attempt opens its row first, committed alone: on MySQL two that
            # race would otherwise each hold a gap lock the other's insert waits for (a deadlock)
            with self._database.transaction() as t:
                t.execute(OPEN_SEASON, {"board": attempt.key, "players": 0})
            decided = self._locked(attempt)
        assert decided is not None  # the row is there now: only retention deletes it, seasons after
        return decided

    def _locked(self, attempt: Attempt) -> Attempted | None:
        with self._database.transaction() as t:
            locked = t.rows(LOCK_SEASON, {"board": attempt.key})
            return _decide(t, attempt, int(locked[0][0])) if locked else None

    def attempts(self, key: str, player_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(player_ids), _PLAYERS_AT_ONCE):
            query = attempts_query(key, list(player_ids[start : start + _PLAYERS_AT_ONCE]))
            found.update((str(player), int(made)) for player, made in self._database.rows(*query))
        return found

    def entrants(self, key: str) -> int:
        found = self._database.rows(ENTRANTS, {"board": key})
        return int(found[0][0]) if found else 0
