"""Release health on SQLite and MySQL alike (ports.releases): the session counter's writes, run in
its checkpoint transaction, and the reads."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite

from adapters.sql.queries import purge
from adapters.sql.reads import Checkpointed, Transaction
from adapters.sql.schema import release_builds, release_players, release_sessions, release_sketches
from adapters.sql.statements import Statement, insert
from ports.releases import (
    DAY_MS,
    EXACT_PLAYERS,
    BuildSeen,
    BuildWindow,
    Outcome,
    PlayerDay,
    ReleaseIncrements,
    estimate,
    merge,
    sketch,
)

_bind = sa.bindparam
INCREMENT = insert(release_sessions, ("sku", "build", "minute", "status", "count"),
                   keys=("sku", "build", "minute", "status"), add=("count",))


def _see_builds() -> Statement:
    """Upsert of a build's first and last minute: the earlier and the later of the two."""
    columns = ("sku", "build", "first_seen", "last_seen")
    values: dict[str, Any] = {c: _bind(c) for c in columns}
    lite = sqlite.insert(release_builds).values(values)
    lite = lite.on_conflict_do_update(index_elements=["sku", "build"], set_={
        "first_seen": sa.func.min(release_builds.c.first_seen, lite.excluded.first_seen),
        "last_seen": sa.func.max(release_builds.c.last_seen, lite.excluded.last_seen)})
    my = mysql.insert(release_builds).values(values)
    my = my.on_duplicate_key_update({
        "first_seen": sa.func.least(release_builds.c.first_seen, my.inserted.first_seen),
        "last_seen": sa.func.greatest(release_builds.c.last_seen, my.inserted.last_seen)})
    return Statement({"sqlite": lite, "mysql": my}, in_order=columns)


SEE_BUILDS = _see_builds()
ADD_PLAYERS = insert(release_players, ("sku", "build", "day", "crashed", "player"),
                     keys=("sku", "build", "day", "crashed", "player"))
SET_SKETCH = insert(release_sketches, ("sku", "build", "day", "crashed", "registers"),
                    keys=("sku", "build", "day", "crashed"), replace=("registers",))


def _of_day(table: sa.Table) -> list[sa.ColumnElement[bool]]:
    c = table.c
    return [c.sku == _bind("sku"), c.build == _bind("build"), c.day == _bind("day"), c.crashed == _bind("crashed")]


# two counters adding the same build's players take turns from SEE_BUILDS on, whose upsert locks the
# build's row on MySQL (SQLite's write transaction holds the file): so the count and the players
# read below see every player the other added (their transaction's snapshot is taken at its first
# plain read, which is the count: none may come before SEE_BUILDS), and the DELETE takes none the
# sketch has not
_SKETCH_FOR_UPDATE = Statement(sa.select(release_sketches.c.registers).where(*_of_day(release_sketches))
                               .with_for_update())
_COUNT_PLAYERS = Statement(sa.select(sa.func.count()).select_from(release_players).where(*_of_day(release_players)))
_PLAYERS_OF_DAY = Statement(sa.select(release_players.c.player).where(*_of_day(release_players)))
_FORGET_PLAYERS = Statement(sa.delete(release_players).where(*_of_day(release_players)))


def apply_releases(t: Transaction, releases: ReleaseIncrements) -> None:
    """The release counts' part of the session counter's transaction."""
    t.execute_rows(INCREMENT, [(b.sku, b.build, b.minute, b.status, n) for b, n in releases.sessions.items()])
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for b in releases.sessions:
        first, last = seen.get((b.sku, b.build), (b.minute, b.minute))
        seen[(b.sku, b.build)] = (min(first, b.minute), max(last, b.minute))
    # in one order for every counter (each locks its builds' rows, below)
    t.execute_rows(SEE_BUILDS, [(sku, build, first, last) for (sku, build), (first, last) in sorted(seen.items())])
    # one order for every counter, so that two never wait on each other's rows
    for day in sorted(releases.players, key=lambda d: (d.sku, d.build, d.day, d.crashed)):
        _add_players(t, day, releases.players[day])


def _add_players(t: Transaction, day: PlayerDay, players: frozenset[str]) -> None:
    key = {"sku": day.sku, "build": day.build, "day": day.day, "crashed": int(day.crashed)}
    found = t.rows(_SKETCH_FOR_UPDATE, key)
    if found:
        t.execute_rows(SET_SKETCH, [(*key.values(), sketch(players, bytes(found[0][0])))])
        return
    t.execute_rows(ADD_PLAYERS, [(*key.values(), p) for p in sorted(players)])
    if int(t.rows(_COUNT_PLAYERS, key)[0][0]) > EXACT_PLAYERS:
        kept = [str(p) for (p,) in t.rows(_PLAYERS_OF_DAY, key)]
        t.execute_rows(SET_SKETCH, [(*key.values(), sketch(kept))])
        t.execute(_FORGET_PLAYERS, key)


# retention: sessions by minute, players by day (each ended before the cut: see purge_releases)
_PURGE_SESSIONS = purge(release_sessions, "minute")
_PURGE_PLAYERS = (purge(release_players, "day"), purge(release_sketches, "day"))
_PURGE_BUILDS = purge(release_builds, "last_seen")


def purge_statements(before_ms: int) -> Iterator[tuple[Statement, int]]:
    """What a purge before `before_ms` runs, each with its `before`: a day goes once it ended."""
    yield _PURGE_SESSIONS, before_ms
    for statement in _PURGE_PLAYERS:
        yield statement, before_ms - DAY_MS + 1
    yield _PURGE_BUILDS, before_ms


_b = release_builds.c
_SELECT_BUILDS = sa.select(_b.build, _b.first_seen, _b.last_seen)
_NEWEST = (_b.first_seen.desc(), _b.build.desc())
_BUILDS = Statement(_SELECT_BUILDS.where(_b.sku == _bind("sku")).order_by(*_NEWEST).limit(_bind("limit")))
_BUILDS_BEFORE = Statement(_SELECT_BUILDS.where(
    _b.sku == _bind("sku"),
    sa.or_(_b.first_seen < _bind("first_seen"), sa.and_(_b.first_seen == _bind("first_seen"),
                                                         _b.build < _bind("build"))),
).order_by(*_NEWEST).limit(_bind("limit")))
_BUILD = Statement(_SELECT_BUILDS.where(_b.sku == _bind("sku"), _b.build == _bind("build")))

_s = release_sessions.c
_bucket = (_s.minute - _s.minute % _bind("bucket_ms")).label("bucket")
_SESSIONS = Statement(sa.select(_bucket, _s.status, sa.func.sum(_s.count)).where(
    _s.sku == _bind("sku"), _s.build == _bind("build"), _s.minute >= _bind("from_ms"), _s.minute < _bind("to_ms"),
).group_by(_bucket, _s.status))

_totals = sa.select(
    _s.sku, _s.build, _b.first_seen, sa.func.sum(_s.count).label("sessions"),
    sa.func.sum(sa.case((_s.status == "crashed", _s.count), else_=0)).label("crashed"),
).join_from(release_sessions, release_builds, sa.and_(_s.sku == _b.sku, _s.build == _b.build)).where(
    _s.minute >= _bind("from_ms"), _s.minute < _bind("to_ms"),
).group_by(_s.sku, _s.build, _b.first_seen).subquery()
_t = _totals.c
_placed = sa.select(_totals, sa.func.row_number().over(
    partition_by=_t.sku, order_by=(_t.sessions.desc(), _t.build)).label("place")).subquery()
_WINDOW = Statement(sa.select(_placed.c.sku, _placed.c.build, _placed.c.first_seen, _placed.c.sessions,
                              _placed.c.crashed).where(_placed.c.place <= _bind("per_sku"))
                    .order_by(_placed.c.sku, _placed.c.build))


def _of_days(table: sa.Table) -> list[sa.ColumnElement[bool]]:
    c = table.c
    return [c.sku == _bind("sku"), c.build == _bind("build"), c.crashed == _bind("crashed"),
            c.day >= _bind("from_day"), c.day < _bind("to_day")]


_SKETCHES = Statement(sa.select(release_sketches.c.registers).where(*_of_days(release_sketches)))
_DISTINCT = Statement(sa.select(sa.func.count(release_players.c.player.distinct())).where(*_of_days(release_players)))
_DISTINCT_PLAYERS = Statement(sa.select(release_players.c.player).distinct().where(*_of_days(release_players)))


class ReleaseReads(Checkpointed):
    def builds(self, sku: str, before: tuple[int, str] | None, limit: int) -> list[BuildSeen]:
        if before is None:
            rows = self._database.rows(_BUILDS, {"sku": sku, "limit": limit})
        else:
            rows = self._database.rows(_BUILDS_BEFORE, {"sku": sku, "first_seen": before[0], "build": before[1],
                                                        "limit": limit})
        return [BuildSeen(str(build), int(first), int(last)) for build, first, last in rows]

    def build(self, sku: str, build: str) -> BuildSeen | None:
        found = self._database.rows(_BUILD, {"sku": sku, "build": build})
        return next((BuildSeen(str(b), int(first), int(last)) for b, first, last in found), None)

    def release_sessions(self, sku: str, build: str, from_ms: int, to_ms: int,
                         bucket_ms: int) -> dict[int, dict[Outcome, int]]:
        rows = self._database.rows(_SESSIONS, {"bucket_ms": bucket_ms, "sku": sku, "build": build,
                                               "from_ms": from_ms, "to_ms": to_ms})
        found: dict[int, dict[Outcome, int]] = {}
        for bucket, group in groupby(sorted(rows, key=lambda r: int(r[0])), key=lambda r: int(r[0])):
            found[bucket] = {cast(Outcome, str(status)): int(n) for _, status, n in group}
        return found

    def window(self, from_ms: int, to_ms: int, per_sku: int) -> list[BuildWindow]:
        return [BuildWindow(str(sku), str(build), int(first), int(sessions), int(crashed)) for
                sku, build, first, sessions, crashed in self._database.rows(_WINDOW, {
                    "from_ms": from_ms, "to_ms": to_ms, "per_sku": per_sku})]

    def players(self, sku: str, build: str, from_day: int, to_day: int, crashed: bool) -> int:
        values: dict[str, Any] = {"sku": sku, "build": build, "crashed": int(crashed), "from_day": from_day,
                                  "to_day": to_day}
        sketches = [bytes(registers) for (registers,) in self._database.rows(_SKETCHES, values)]
        if not sketches:
            return int(self._database.rows(_DISTINCT, values)[0][0])
        # the days still held by id join the sketch of the others
        kept = (str(p) for (p,) in self._database.rows(_DISTINCT_PLAYERS, values))
        return estimate(sketch(kept, merge(sketches)))
