"""Release health's counts on both storages (ports.releases through ports.SessionCounters), and the
release figures against brute force: random streams of sessions and crashes go through the real
session counter (batched, some batches redelivered) and the crash index, and every figure of
crashes.releases must equal the one computed from the stream."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded.index import SqliteSessionCounters
from adapters.embedded.log import SqliteEventLog
from adapters.mysql.index import MysqlSessionCounters
from crashes import releases
from crashes.releases import list_builds, release_health
from ports import Checkpoint, CrashIndex, EventLog, IndexEntry, LogRecord, SessionCounters
from ports.cursors import Kind, encode_cursor, of_scope
from ports.errors import InvalidField
from ports.issues import build_order
from ports.limits import INT64_MAX
from ports.releases import (
    DAY_MS,
    EXACT_PLAYERS,
    SKETCH_ERROR,
    BuildSeen,
    PlayerDay,
    ReleaseBucket,
    ReleaseIncrements,
    estimate,
    merge,
    sketch,
)
from ports.timeutil import HOUR_MS, floor_to, now_ms, to_rfc3339
from sessions.counting import count_sessions
from sessions.model import SessionCount, SessionEnvelope
from tests.contract.conftest import index_with

M = 60_000


# the crash index and the counters
stores = index_with(SqliteSessionCounters, MysqlSessionCounters)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EventLog]:
    log = SqliteEventLog(tmp_path / "log.sqlite")
    yield log
    log.close()


def test_sessions_by_outcome_and_builds_newest_first(stores: tuple[CrashIndex, SessionCounters]) -> None:
    _, counters = stores
    counters.apply(Checkpoint("c", "s-0", -1, 0), {}, ReleaseIncrements({
        ReleaseBucket("g", "1.0", 2 * M, "ok"): 3, ReleaseBucket("g", "1.0", 2 * M, "crashed"): 1,
        ReleaseBucket("g", "1.0", 5 * M, "ok"): 2, ReleaseBucket("g", "1.1", 4 * M, "errored"): 1,
        ReleaseBucket("h", "1.0", 0, "ok"): 7,
    }))
    counters.apply(Checkpoint("c", "s-0", 0, 1), {}, ReleaseIncrements({
        ReleaseBucket("g", "1.0", 2 * M, "ok"): 1, ReleaseBucket("g", "1.0", M, "abnormal"): 1,
        ReleaseBucket("g", "0.9", 4 * M, "ok"): 1,
    }))
    assert counters.release_sessions("g", "1.0", 0, 10 * M, M) == {
        M: {"abnormal": 1}, 2 * M: {"ok": 4, "crashed": 1}, 5 * M: {"ok": 2}}
    assert counters.release_sessions("g", "1.0", 2 * M, 5 * M, 10 * M) == {0: {"ok": 4, "crashed": 1}}
    assert counters.build("g", "1.0") == BuildSeen("1.0", M, 5 * M)
    assert counters.build("g", "2.0") is None
    # first seen, newest first; ties by build, the greater first
    assert counters.builds("g", None, 10) == [BuildSeen("1.1", 4 * M, 4 * M), BuildSeen("0.9", 4 * M, 4 * M),
                                              BuildSeen("1.0", M, 5 * M)]
    assert counters.builds("g", (4 * M, "1.1"), 1) == [BuildSeen("0.9", 4 * M, 4 * M)]
    assert counters.builds("g", (4 * M, "0.9"), 5) == [BuildSeen("1.0", M, 5 * M)]
    assert counters.builds("x", None, 5) == []
    # found from outside: one sku's cursor paged another's builds from its position
    cursor = list_builds(counters, "g", limit=1)["nextCursor"]
    assert cursor is not None and list_builds(counters, "g", limit=1, cursor=cursor)["builds"][0]["build"] == "0.9"
    with pytest.raises(InvalidField):
        list_builds(counters, "h", limit=1, cursor=cursor)


def test_a_trailing_space_is_part_of_a_build_and_of_a_player(stores: tuple[CrashIndex, SessionCounters]) -> None:
    """Found from outside: MySQL's utf8mb4_bin compared "2.0" and "2.0 " as one build, and "a" and
    "a " as one player."""
    index, counters = stores
    day = floor_to(now_ms(), DAY_MS)
    counters.apply(Checkpoint("c", "s-0", -1, 0), {}, ReleaseIncrements(
        {ReleaseBucket("g", "2.0", day, "ok"): 1, ReleaseBucket("g", "2.0 ", day + M, "crashed"): 1},
        players={PlayerDay("g", "2.0", day, False): frozenset({"a", "a "})}))
    assert counters.build("g", "2.0") == BuildSeen("2.0", day, day)
    assert counters.build("g", "2.0 ") == BuildSeen("2.0 ", day + M, day + M)
    assert counters.release_sessions("g", "2.0", day, day + DAY_MS, DAY_MS) == {day: {"ok": 1}}
    index.insert_many([IndexEntry(uuid.uuid4().hex, str(uuid.uuid4()), "g", day + 3, 1, build_version="2.0 ")])
    assert release_health(index, counters, "g", "2.0", from_ms=day, to_ms=day + DAY_MS)["players"] == 2
    assert release_health(index, counters, "g", "2.0", from_ms=day, to_ms=day + DAY_MS)["crashes"] == 0


def test_players_are_exact_by_id_then_a_sketch(stores: tuple[CrashIndex, SessionCounters]) -> None:
    _, counters = stores
    day = PlayerDay("g", "1.0", DAY_MS, False)
    counters.apply(Checkpoint("c", "s-0", -1, 0), {}, ReleaseIncrements(players={
        day: frozenset({"a", "b"}), PlayerDay("g", "1.0", 2 * DAY_MS, False): frozenset({"b", "c"}),
        PlayerDay("g", "1.0", DAY_MS, True): frozenset({"b"}),
    }))
    counters.apply(Checkpoint("c", "s-0", 0, 1), {}, ReleaseIncrements(players={day: frozenset({"a", "d"})}))
    assert counters.players("g", "1.0", DAY_MS, 2 * DAY_MS, crashed=False) == 3
    assert counters.players("g", "1.0", 0, 3 * DAY_MS, crashed=False) == 4  # b on both days is one player
    assert counters.players("g", "1.0", 0, 3 * DAY_MS, crashed=True) == 1
    assert counters.players("g", "1.1", 0, 3 * DAY_MS, crashed=False) == 0
    # beyond EXACT_PLAYERS a day is a sketch; the days still by id join it
    many = [f"player-{i}" for i in range(3 * EXACT_PLAYERS)]
    for offset, start in enumerate(range(0, len(many), 700), start=2):
        counters.apply(Checkpoint("c", "s-0", offset - 1, offset), {},
                       ReleaseIncrements(players={day: frozenset(many[start : start + 700])}))
    exact = len(set(many) | {"a", "b", "c", "d"})
    for got in (counters.players("g", "1.0", DAY_MS, 2 * DAY_MS, crashed=False),
                counters.players("g", "1.0", 0, 3 * DAY_MS, crashed=False)):
        assert abs(got - exact) <= 4 * SKETCH_ERROR * exact
    assert counters.players("g", "1.0", 0, 3 * DAY_MS, crashed=True) == 1


def test_the_sketch_merges_and_estimates_within_its_error() -> None:
    a = [f"a{i}" for i in range(50_000)]
    b = [f"b{i}" for i in range(30_000)] + a[:10_000]
    union = estimate(merge([sketch(a), sketch(b)]))
    assert abs(union - 80_000) <= 4 * SKETCH_ERROR * 80_000
    assert estimate(sketch(a[:10])) == 10  # small counts: linear counting, all but exact
    assert merge([sketch(a), sketch(b)]) == sketch(a + b)


def test_the_sketch_keeps_its_error_where_its_estimator_used_to_switch() -> None:
    """Found from outside: a build of 10,000 players a day was answered 2.5% to 4.4% high, as the
    estimate went from linear counting to HyperLogLog's raw estimate at 2.5 registers a player,
    which runs high there. At every count, over 64 sets of players, the estimates are unbiased and
    95% of them within twice the standard error, as the contract says."""
    checkpoints = (2_000, 5_000, 9_000, 10_000, 10_500, 11_000, 13_000, 20_000, 40_000)
    errors: dict[int, list[float]] = {n: [] for n in checkpoints}
    for trial in range(64):
        registers = None
        added = 0
        for n in checkpoints:
            registers = sketch((f"{trial}:{i}" for i in range(added, n)), registers)
            added = n
            errors[n].append(estimate(registers) / n - 1)
    for n, got in errors.items():
        within = sum(abs(e) <= 2 * SKETCH_ERROR for e in got) / len(got)
        bias = sum(got) / len(got)
        assert within >= 0.9 and abs(bias) <= SKETCH_ERROR / 2, (n, within, bias)


def test_purge_drops_release_counts_of_the_days_before_it(stores: tuple[CrashIndex, SessionCounters]) -> None:
    _, counters = stores
    today = floor_to(now_ms(), DAY_MS)
    old = today - 2 * DAY_MS
    counters.apply(Checkpoint("c", "s-0", -1, 0), {}, ReleaseIncrements(
        {ReleaseBucket("g", "old", old, "ok"): 1, ReleaseBucket("g", "new", today, "crashed"): 2},
        {PlayerDay("g", "old", old, False): frozenset({"p"}), PlayerDay("g", "new", today, True): frozenset({"q"})},
    ))
    assert counters.purge(today - DAY_MS) == 3  # old's sessions, players and build
    assert counters.builds("g", None, 5) == [BuildSeen("new", today, today)]
    assert counters.release_sessions("g", "old", 0, today + DAY_MS, DAY_MS) == {}
    assert counters.players("g", "old", 0, today + DAY_MS, crashed=False) == 0
    # a day that has not ended by the cut stays whole
    assert counters.purge(today + 1) == 2  # new's sessions of today's first minute, and so the build
    assert counters.players("g", "new", today, today + DAY_MS, crashed=True) == 1


# --- release figures against brute force -------------------------------------------------------

# a trailing space is part of a build and of a player: MySQL's utf8mb4_bin once merged them
BUILDS = ["1.0", "1.9", "1.10", "2.0", "2.0 "]
DAYS = 3
_session = st.tuples(
    st.sampled_from([*BUILDS, None]),
    st.integers(0, DAYS * 24 * 60 - 1),  # its minute
    st.sampled_from(["ok", "crashed", "abnormal", "errored", None]),
    st.sampled_from([f"p{i}" for i in range(6)] + ["p0 ", None]),
    st.integers(1, 3),  # sessions the count stands for
)
_crash = st.tuples(st.sampled_from([*BUILDS, None]), st.integers(0, DAYS * 24 * 60 - 1))


def test_of_builds_first_seen_in_one_minute_the_previous_is_the_one_before_in_build_order(
        stores: tuple[CrashIndex, SessionCounters], log: EventLog) -> None:
    # found from outside: they were ordered as text, so 1.10 was 1.9's previous, and a crash-free
    # drop of 1.9 against 1.10 was told; a studio that points its DSN at Blackbox sees every live
    # build first in one minute
    index, counters = stores
    sku = f"g-{uuid.uuid4().hex[:12]}"
    t0 = floor_to(now_ms(), DAY_MS) - DAY_MS
    builds = [("0.9", 0), ("1.10", 5), ("2.0.0", 5), ("1.9", 5), ("2.0.0-beta", 5), ("3.0", 9)]
    count_sessions(_records(f"sessions.{sku}", sku, t0, [(b, minute, "ok", None, 1) for b, minute in builds],
                            itertools.count()), counters, log)
    previous = {build: (release_health(index, counters, sku, build, from_ms=t0, to_ms=t0 + DAY_MS)["previous"]
                        or {}).get("build") for build, _ in builds}
    # and of the builds of an earlier minute, the last in build order (found in review: the last as text)
    assert previous == {"0.9": None, "1.9": "0.9", "1.10": "1.9", "2.0.0-beta": "1.10", "2.0.0": "2.0.0-beta",
                        "3.0": "2.0.0"}
    # found from outside: the listing, newest first, gave a minute's builds in text order, and a page
    # of 3 ended inside that minute
    listed, cursor = [], None
    while True:
        page = list_builds(counters, sku, limit=3, cursor=cursor)
        listed += [b["build"] for b in page["builds"]]
        if (cursor := page["nextCursor"]) is None:
            break
    assert listed == ["3.0", "2.0.0", "2.0.0-beta", "1.10", "1.9", "0.9"]
    # found in review: a cursor at the last minute there is read on from the minute after it, past int64
    last = encode_cursor(of_scope(Kind.BUILDS, sku), f"{INT64_MAX}:zzz")
    assert [b["build"] for b in list_builds(counters, sku, limit=3, cursor=last)["builds"]] == listed[:3]


class _Reading:
    """Release counts that count the builds they read."""

    def __init__(self, counts: SessionCounters) -> None:
        self.counts, self.read = counts, 0

    def builds(self, sku: str, before: tuple[int, str] | None, limit: int) -> list[BuildSeen]:
        found = self.counts.builds(sku, before, limit)
        self.read += len(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.counts, name)


def test_a_minute_of_very_many_builds_is_listed_as_read(stores: tuple[CrashIndex, SessionCounters], log: EventLog,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: a game's ingest key made 100,000 builds of a sku in a minute, and each
    read of its release health then sorted them all (1.2 to 1.7 s). A minute's builds are listed in
    build order up to SORTED_BUILDS, and past them in text order, as read: every listing, page and
    previous build reads a bounded number, and they still agree on one order."""
    monkeypatch.setattr(releases, "SORTED_BUILDS", 4, raising=False)
    monkeypatch.setattr(releases, "_PAGE", 3)
    index, counters = stores
    sku = f"g-{uuid.uuid4().hex[:12]}"
    t0 = floor_to(now_ms(), DAY_MS) - DAY_MS
    crowded = ["a1", "b10", "b9", "c", "1.2", "0.10"]
    builds = [("1.0", 1), *((b, 3) for b in crowded), ("1.10", 5), ("1.9", 5), ("2.0", 5), ("3.0", 7)]
    count_sessions(_records(f"sessions.{sku}", sku, t0, [(b, minute, "ok", None, 1) for b, minute in builds],
                            itertools.count()), counters, log)
    # minute 7; minute 5 in build order; minute 3 in text order, the greatest first; minute 1
    order = ["3.0", "2.0", "1.10", "1.9", "c", "b9", "b10", "a1", "1.2", "0.10", "1.0"]
    reading = _Reading(counters)
    for limit in (1, 2, 3, 11):
        listed, cursor = [], None
        while True:
            page = list_builds(reading, sku, limit=limit, cursor=cursor)  # type: ignore[arg-type]
            listed += [b["build"] for b in page["builds"]]
            if (cursor := page["nextCursor"]) is None:
                break
        assert listed == order, limit
    for build, _ in builds:
        previous = (release_health(index, reading, sku, build, from_ms=t0,  # type: ignore[arg-type]
                                   to_ms=t0 + DAY_MS)["previous"] or {}).get("build")
        assert previous == dict(itertools.pairwise([*order, None]))[build], build
    assert releases.previous_builds(reading, sku, {b: t0 + minute * M for b, minute in builds}) == {  # type: ignore[arg-type]
        build: None if before is None else BuildSeen(before, *[t0 + m * M for b, m in builds if b == before] * 2)
        for build, before in itertools.pairwise([*order, None])}
    # from review: a cursor within a crowded minute lists only those after it (the minute's mode
    # is the read's own, not one a check before it found)
    assert [b["build"] for b in list_builds(counters, sku, limit=11, cursor=encode_cursor(
        of_scope(Kind.BUILDS, sku), f"{t0 + 3 * M}:b10"))["builds"]] == order[order.index("b10") + 1:]
    # a read of the crowded minute's last build: its minute's first 5 and its successors, a page each
    reading.read = 0
    assert releases.previous_build(reading, sku, "1.2", t0 + 3 * M) == BuildSeen("0.10", t0 + 3 * M, t0 + 3 * M)
    assert reading.read <= 5 + 2 * 3


def _records(topic: str, sku: str, t0: int, sessions: list, offsets: Iterator[int]) -> list[LogRecord]:
    """One record per session, as capture publishes a request's sessions of one sku."""
    return [
        LogRecord(topic, 0, next(offsets), SessionEnvelope(
            eventId=str(uuid.uuid4()), receivedAt=t0 + minute * M + 7,
            sessions=[SessionCount(sku=sku, kind="client", count=1 if player else count, buildVersion=build,
                                   status=status, playerId=player if build else None)],
        ).model_dump_json(exclude_defaults=True).encode(), None, (), 0)
        for build, minute, status, player, count in sessions
    ]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(_session, max_size=40), crashes=st.lists(_crash, max_size=15),
       cuts=st.lists(st.integers(1, 8), min_size=1, max_size=5), redeliver=st.booleans(),
       interval=st.sampled_from(["hour", "day"]))
def test_release_figures_equal_brute_force(stores: tuple[CrashIndex, SessionCounters], log: EventLog, sessions,
                                           crashes, cuts, redeliver, interval):
    index, counters = stores
    sku = f"g-{uuid.uuid4().hex[:12]}"  # a fresh sku per example: skus share nothing
    t0 = floor_to(now_ms(), DAY_MS) - DAYS * DAY_MS
    records = _records(f"sessions.{sku}", sku, t0, sessions, itertools.count())
    done = 0
    for cut in itertools.cycle(cuts):
        if done >= len(records):
            break
        batch = records[done : done + cut]
        count_sessions(batch, counters, log)
        if redeliver:
            assert count_sessions(batch, counters, log) == 0
        done += cut
    index.insert_many([IndexEntry(uuid.uuid4().hex, str(uuid.uuid4()), sku, t0 + minute * M + 3, 1,
                                  build_version=build) for build, minute in crashes])

    # brute force: every session of a build counted `count` times, players by id
    def of(build: str) -> list:
        return [s for s in sessions if s[0] == build]

    seen = {b: (min(m for _, m, *_ in of(b)), max(m for _, m, *_ in of(b))) for b in BUILDS if of(b)}
    # first seen, newest first; of a minute's, the last in build order first
    newest = sorted(seen, key=lambda b: (seen[b][0], build_order(b), b), reverse=True)
    assert list_builds(counters, sku, limit=len(BUILDS))["builds"] == [
        {"build": b, "firstSeen": to_rfc3339(t0 + seen[b][0] * M), "lastSeen": to_rfc3339(t0 + seen[b][1] * M)}
        for b in newest]
    everyone = sum(count if player is None else 1 for *_, player, count in sessions)

    def figures(build: str) -> dict:
        mine = of(build)
        total = sum(c if p is None else 1 for *_, p, c in mine)
        crashed = sum(c if p is None else 1 for _, _, status, p, c in mine if status == "crashed")
        players = {p for *_, p, _ in mine if p is not None}
        crashed_players = {p for _, _, status, p, _ in mine if p is not None and status == "crashed"}
        n = sum(1 for b, _ in crashes if b == build)
        return {"sessions": total, "crashes": n, "players": len(players), "crashedPlayers": len(crashed_players),
                "adoption": total / everyone if everyone else None,
                "crashFreeSessions": 1 - crashed / total if total else None,
                "crashFreePlayers": 1 - len(crashed_players) / len(players) if players else None,
                "crashRate": n / total if total else None}

    for build in seen:
        got = release_health(index, counters, sku, build, from_ms=t0, to_ms=t0 + DAYS * DAY_MS, interval=interval)
        want = figures(build)
        assert {name: got[name] for name in want} == pytest.approx(want)  # type: ignore[literal-required]
        # the previous: first seen before it, and of those first seen in its minute, before it in build order
        ordered = sorted(seen, key=lambda b: (seen[b][0], build_order(b), b))
        before = ordered[ordered.index(build) - 1] if ordered.index(build) > 0 else None
        assert (got["previous"] or {}).get("build") == before
        if before is not None:
            assert {name: got["previous"][name] for name in want} == pytest.approx(figures(before))  # type: ignore
        step = HOUR_MS if interval == "hour" else DAY_MS
        assert len(got["series"]) == DAYS * DAY_MS // step
        assert sum(b["sessions"] for b in got["series"]) == want["sessions"]
        assert sum(b["crashes"] for b in got["series"]) == want["crashes"]
        by_bucket: dict[int, int] = {}
        for _, minute, _, player, count in of(build):
            key = (minute * M) // step
            by_bucket[key] = by_bucket.get(key, 0) + (count if player is None else 1)
        assert [b["sessions"] for b in got["series"]] == [by_bucket.get(k, 0) for k in range(DAYS * DAY_MS // step)]


def test_a_window_is_its_own_90_days_and_by_default_7_days_of_whole_buckets(
        stores: tuple[CrashIndex, SessionCounters], log: EventLog) -> None:
    # found from outside: 90 days from within a bucket were refused (the bucket's start was counted),
    # and a `to` on a bucket's start gave 6 days by default
    index, counters = stores
    sku = f"g-{uuid.uuid4().hex[:12]}"
    t0 = floor_to(now_ms(), DAY_MS) - DAY_MS
    count_sessions(_records(f"sessions.{sku}", sku, t0, [("1.0", 0, "ok", None, 1)], itertools.count()), counters, log)
    noon = t0 + 12 * HOUR_MS
    for interval in ("day", "hour"):
        got = release_health(index, counters, sku, "1.0", from_ms=noon - 90 * DAY_MS, to_ms=noon, interval=interval)
        assert got["sessions"] == 1
        whole = release_health(index, counters, sku, "1.0", to_ms=t0 + DAY_MS, interval=interval)
        assert len(whole["series"]) == 7 * DAY_MS // (DAY_MS if interval == "day" else HOUR_MS)
    with pytest.raises(InvalidField):
        release_health(index, counters, sku, "1.0", from_ms=noon - 90 * DAY_MS - 1, to_ms=noon)
