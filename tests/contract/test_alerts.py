"""Velocity and crash-free drop alerts (crashes.alerts) on both storages: the reads they take (a
window's builds, its groups' reports by build), episodes opened once however many runs race, and
random streams of sessions, crashes and runs against a brute-force model of the two conditions:
the alerts raised are the model's episode starts, the open episodes its true conditions, and the
alert history each episode with the run that closed it."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
from adapters.embedded.issues import SqliteIssueStore
from adapters.mysql.index import MysqlCrashIndex, MysqlSessionCounters
from adapters.mysql.issues import MysqlIssueStore
from crashes import alerts
from crashes.alerts import CRASH_FREE_DROP, KINDS, VELOCITY, AlertPolicy, crossings, episode_key, tell_alerts
from crashes.releases import previous_build, previous_builds
from ports import Checkpoint, CrashIndex, IndexEntry, SessionCounters
from ports.issues import Alert, Episode, GroupCount, IssueStore, Webhook
from ports.releases import DAY_MS, BuildWindow, Outcome, ReleaseBucket, ReleaseIncrements
from tests.contract.conftest import ENGINES
from tests.services import mysql_database, namespace

M = 60_000
Stores = tuple[CrashIndex, SessionCounters, IssueStore]


@pytest.fixture(params=ENGINES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """The crash index, the counters and the issues in one database, as a deployment has them."""
    if request.param == "embedded":
        database = SqliteIndexDatabase(tmp_path / "index.sqlite")
        yield SqliteCrashIndex(database), SqliteSessionCounters(database), SqliteIssueStore(database)
        return
    with mysql_database(namespace()) as mysql:
        yield MysqlCrashIndex(mysql), MysqlSessionCounters(mysql), MysqlIssueStore(mysql)


class _Feed:
    """Sessions through the counters' checkpointed writes, crashes into the index."""

    def __init__(self, stores: Stores) -> None:
        self.index, self.counters, _ = stores
        self.partition = f"p-{uuid.uuid4().hex[:8]}"
        self.offset = 0

    def sessions(self, sku: str, build: str, minute: int, status: Outcome, n: int) -> None:
        self.builds_sessions(sku, [build], minute, status, n)

    def builds_sessions(self, sku: str, builds: list[str], minute: int, status: Outcome, n: int) -> None:
        """`n` sessions of each of `builds`, in one batch."""
        self.counters.apply(Checkpoint("c", self.partition, self.offset - 1, self.offset), {},
                            ReleaseIncrements({ReleaseBucket(sku, build, minute, status): n for build in builds}))
        self.offset += 1

    def crashes(self, sku: str, build: str, signature: str, at: int, n: int = 1) -> None:
        self.index.insert_many([IndexEntry(report_key=uuid.uuid4().hex, event_id=uuid.uuid4().hex, sku=sku,
                                           received_at=at, size_bytes=1, signature=signature, build_version=build)
                                for _ in range(n)])


def test_a_window_reads_each_builds_sessions_and_each_groups_reports(stores: Stores) -> None:
    _, counters, issues = stores
    feed = _Feed(stores)
    feed.sessions("g", "1.0", 0, "ok", 5)
    feed.sessions("g", "1.0", 2 * M, "crashed", 2)
    feed.sessions("g", "1.1", 3 * M, "ok", 1)
    feed.sessions("h", "9", 2 * M, "abnormal", 4)
    feed.sessions("g", "1.1", 9 * M, "crashed", 1)  # after the window
    assert counters.window(M, 9 * M, 10) == [BuildWindow("g", "1.0", 0, 2, 2),
                                             BuildWindow("g", "1.1", 3 * M, 1, 0), BuildWindow("h", "9", 2 * M, 4, 0)]
    assert counters.window(10 * M, 20 * M, 10) == []
    # of each sku, those with the most sessions; of as many, the first as text
    assert counters.window(M, 9 * M, 1) == [BuildWindow("g", "1.0", 0, 2, 2), BuildWindow("h", "9", 2 * M, 4, 0)]
    feed.sessions("g", "1.1", 4 * M, "ok", 1)
    feed.sessions("g", "0.9", 4 * M, "ok", 2)
    assert counters.window(M, 9 * M, 2) == [BuildWindow("g", "0.9", 4 * M, 2, 0), BuildWindow("g", "1.0", 0, 2, 2),
                                            BuildWindow("h", "9", 2 * M, 4, 0)]
    feed.crashes("g", "1.0", "aa", M, 3)
    feed.crashes("g", "1.1", "aa", M + 1)
    feed.crashes("g", "1.0", "bb", M - 1, 3)  # before the window
    feed.crashes("g", "1.0", "bb", M, 1)
    feed.crashes("h", "1.0", "aa", M, 5)
    feed.index.insert_many([IndexEntry(report_key="nb", event_id="nb", sku="g", received_at=M, size_bytes=1,
                                       signature="cc")])  # no build: no velocity
    assert sorted(issues.group_counts("g", ["1.0", "1.1"], M, 2 * M, 1), key=lambda c: (c.build, c.signature)) == [
        GroupCount("1.0", "aa", 3), GroupCount("1.0", "bb", 1), GroupCount("1.1", "aa", 1)]
    assert issues.group_counts("g", ["1.0", "1.1"], M, 2 * M, 2) == [GroupCount("1.0", "aa", 3)]
    # the builds named alone (those with sessions in the window: no other can cross a rate)
    assert issues.group_counts("g", ["1.1", "7"], M, 2 * M, 1) == [GroupCount("1.1", "aa", 1)]
    assert issues.group_counts("g", [], M, 2 * M, 1) == []


def test_a_windows_groups_of_many_builds_are_each_counted(stores: Stores) -> None:
    """More builds than one statement names at once (a day of nightly builds, a build a minute)."""
    _, _, issues = stores
    feed = _Feed(stores)
    builds = [f"1.{n}" for n in range(700)]
    for n, build in enumerate(builds):
        feed.crashes("g", build, "aa", M + n, 1 + n % 3)
    counts = issues.group_counts("g", builds[::-1], M, 2 * M, 2)
    assert sorted(counts, key=lambda c: c.build) == sorted(
        (GroupCount(build, "aa", 1 + n % 3) for n, build in enumerate(builds) if n % 3), key=lambda c: c.build)


class _CountedBuildReads:
    """The counters, counting their reads of a sku's builds (pages of the builds listing)."""

    def __init__(self, counters: SessionCounters) -> None:
        self._counters, self.reads = counters, 0

    def builds(self, *args: Any) -> Any:
        self.reads += 1
        return self._counters.builds(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._counters, name)


def test_a_run_reads_a_skus_builds_once_however_many_are_live(stores: Stores) -> None:
    """Found from outside: each live build's previous build was looked up on its own, each time
    from the newest build down, so a run over 2,000 builds first seen in one minute (a studio that
    points its DSN at Blackbox) took 18 s, where it runs every 10 s."""
    _, counters, issues = stores
    feed = _Feed(stores)
    builds = [f"1.{n}" for n in range(1_100)]  # more than a page of the listing (1,000)
    for build in builds:
        feed.sessions("g", build, M, "ok", POLICY.crash_free_min_sessions)  # each may drop: each looked for
    counted = _CountedBuildReads(counters)
    assert crossings(counted, issues, POLICY, 2 * M) == []  # type: ignore[arg-type]
    assert counted.reads <= 3


class _Walked(list[BuildWindow]):
    """A window's rows, counting the walks over them."""

    walks = 0

    def __iter__(self) -> Iterator[BuildWindow]:
        self.walks += 1
        return super().__iter__()


def test_a_run_walks_the_windows_rows_once_however_many_skus_are_live(stores: Stores) -> None:
    """Found from outside: each sku's builds were picked from the whole window, a walk of its rows
    a sku, so an ingest key posting sessions of thousands of made-up skus had each run of the
    alerts (the webhooks function's, before its deliveries) take the skus times the rows."""
    _, counters, issues = stores
    feed = _Feed(stores)
    for n in range(200):
        feed.sessions(f"g{n}", "1.0", M, "ok", 1)
    rows = _Walked(counters.window(0, 2 * M, POLICY.watched_builds))
    assert len(rows) == 200
    windowed = _CountedBuildReads(counters)
    windowed.window = lambda *_: rows  # type: ignore[attr-defined]
    assert crossings(windowed, issues, POLICY, 2 * M) == []  # type: ignore[arg-type]
    assert rows.walks == 1


class _CountedGroupReads:
    """The issues, keeping the builds each read of a window's groups named."""

    def __init__(self, issues: IssueStore) -> None:
        self._issues = issues
        self.named: list[list[str]] = []

    def group_counts(self, sku: str, builds: list[str], *args: Any) -> Any:
        self.named.append(list(builds))
        return self._issues.group_counts(sku, builds, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._issues, name)


def test_a_run_watches_a_bounded_number_of_a_skus_builds(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: a title's ingest key (it ships in the game) posting sessions of 300,000
    made-up builds had each run read every one, some 3.5 s of the consumers' CPU every 10 s, which
    every title's alerts waited behind. A run watches the builds with the most sessions, and looks
    for the previous build of those with enough sessions to drop only."""
    _, counters, issues = stores
    feed = _Feed(stores)
    policy = POLICY.model_copy(update={"watched_builds": 5})
    feed.sessions("g", "1.0", M, "ok", 10)
    feed.sessions("g", "1.1", 2 * M, "ok", 5)
    feed.sessions("g", "1.1", 2 * M, "crashed", 5)
    feed.crashes("g", "1.1", "aa", 2 * M, 6)
    feed.builds_sessions("g", [f"made-up-{n}" for n in range(1_100)], 3 * M, "ok", 1)  # newer than both, 1 each
    counted, reads = _CountedBuildReads(counters), _CountedGroupReads(issues)
    found = crossings(counted, reads, policy, 4 * M)  # type: ignore[arg-type]
    assert sorted(c.kind for c in found) == [CRASH_FREE_DROP, VELOCITY]
    assert [len(named) for named in reads.named] == [5]
    assert counted.reads == 1  # from 1.1 down: none of the made-up builds is walked
    # one made-up build that may drop, newest of all: the walk down from it stops at WALKED_BUILDS,
    # short of 1.1 and 1.0, which then drop from nothing
    monkeypatch.setattr(alerts, "WALKED_BUILDS", 100)
    feed.sessions("g", "made-up-newest", 4 * M, "ok", POLICY.crash_free_min_sessions)
    counted = _CountedBuildReads(counters)
    assert [c.kind for c in crossings(counted, issues, policy, 5 * M)] == [VELOCITY]  # type: ignore[arg-type]
    assert counted.reads <= 2  # a minute of more than SORTED_BUILDS is read past them to tell it is


def test_the_previous_builds_of_many_are_each_ones_previous_build(stores: Stores) -> None:
    _, counters, _ = stores
    feed = _Feed(stores)
    placed = {"1.9": 0, "1.10": 0, "2.0-rc1": M, "2.0": M, "2.0.1": 3 * M, "0.1": 3 * M, "3": 5 * M}
    for build, minute in placed.items():
        feed.sessions("g", build, minute, "ok", 1)
    for wanted in (placed, {"2.0": M, "1.10": 0}, {"1.9": 0}, {"3": 5 * M, "0.1": 3 * M}):
        assert previous_builds(counters, "g", wanted) == {
            build: previous_build(counters, "g", build, minute) for build, minute in wanted.items()}
    # a walk that lists 3 builds at most: the 3 newest have theirs, the others none
    bounded = previous_builds(counters, "g", placed, most=3)
    reached = {build for build, before in bounded.items() if before is not None}
    assert len(reached) == 3 and max(placed[b] for b in placed.keys() - reached) <= min(placed[b] for b in reached)
    assert all(bounded[b] == previous_build(counters, "g", b, placed[b]) for b in reached)


def test_an_episode_opens_once_when_runs_race_and_again_after_it_closed(stores: Stores) -> None:
    _, _, issues = stores
    issues.put_webhook(Webhook("ops", "https://hooks.example.com/x", "s" * 16, (VELOCITY,), 0))
    racers = 8
    start = threading.Barrier(racers)
    opened: list[bool] = []

    def open_at(at: int) -> None:
        start.wait()
        opened.append(issues.open_episode(Episode("velocity:k", VELOCITY, at),
                                          Alert(f"velocity:k:{at}", VELOCITY, at, {"text": "t"})))

    threads = [threading.Thread(target=open_at, args=(1000 + n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(opened) == [False] * (racers - 1) + [True]
    (episode,) = issues.episodes(VELOCITY)
    assert issues.episodes(CRASH_FREE_DROP) == []
    assert len(issues.due(10_000, 100)) == 1  # one alert, one delivery
    # a run that read an older episode closes nothing
    assert not issues.close_episode(Episode(episode.key, VELOCITY, episode.opened_at - 1), 4000)
    assert issues.close_episode(episode, 4000) and issues.episodes(VELOCITY) == []
    assert issues.open_episode(Episode("velocity:k", VELOCITY, 5000), Alert("velocity:k:5000", VELOCITY, 5000, {}))
    assert len(issues.due(10_000, 100)) == 2


def test_a_run_that_read_the_window_before_another_changed_an_episode_leaves_that_change(stores: Stores) -> None:
    """Found in review: runs overlap (a consumers process on each machine runs the teller every
    10 s); one that read the window before a newer run closed an episode opened it again, raising
    a second alert for one episode, and one that read it before a newer run opened one closed it."""
    _, _, issues = stores
    issues.put_webhook(Webhook("ops", "https://hooks.example.com/x", "s" * 16, (VELOCITY,), 0))

    def opened(at: int) -> bool:
        return issues.open_episode(Episode("velocity:k", VELOCITY, at), Alert(f"velocity:k:{at}", VELOCITY, at, {}))

    assert opened(1_000)
    assert issues.close_episode(Episode("velocity:k", VELOCITY, 1_000), 3_000)  # the run of 3 s: false
    assert not opened(2_000)  # the run of 2 s, which read it true, ends after it
    assert issues.episodes(VELOCITY) == [] and len(issues.due(10_000, 100)) == 1
    assert opened(4_000)  # the run of 4 s: true
    assert not issues.close_episode(Episode("velocity:k", VELOCITY, 4_000), 3_500)  # a run of 3.5 s ends after it
    assert issues.episodes(VELOCITY) == [Episode("velocity:k", VELOCITY, 4_000)]
    # a change from a clock far ahead does not hold the others back for ever, nor a day later
    assert opened(4_000 + 86_400_000) is False  # open already: nothing to open
    assert issues.close_episode(Episode("velocity:k", VELOCITY, 4_000), 5_000)
    assert opened(86_400_000 - 60_000)
    # a newer run that found nothing to change holds back an older one all the same (found in
    # review: the older closed what the newer found true, and the next run opened it again)
    assert issues.told(86_400_000)
    assert not issues.told(86_400_000 - 1)
    assert not issues.close_episode(Episode("velocity:k", VELOCITY, 86_400_000 - 60_000), 86_400_000 - 1)
    assert issues.close_episode(Episode("velocity:k", VELOCITY, 86_400_000 - 60_000), 86_400_000)


def test_an_opened_episode_is_logged_besides_its_webhook(stores: Stores, caplog: pytest.LogCaptureFixture) -> None:
    _, _, issues = stores
    feed, sku, clock = _Feed(stores), f"l{uuid.uuid4().hex[:12]}", next(_bases)
    feed.sessions(sku, "1", clock - M, "ok", 2)
    feed.crashes(sku, "1", "s1", clock - M, n=2)
    assert tell_alerts(feed.counters, issues, POLICY, clock) == 1
    assert tell_alerts(feed.counters, issues, POLICY, clock) == 0
    (logged,) = [r for r in caplog.records if r.getMessage() == VELOCITY]
    alert = logged.__dict__["alert"]
    assert (logged.levelname, alert["sku"], alert["signature"], alert["events"]) == ("WARNING", sku, "s1", 2)


# --- against a model ---------------------------------------------------------------------------

def test_a_window_counts_sessions_and_reports_over_the_same_minutes(stores: Stores) -> None:
    """Found in review: the sessions of the minute a window starts in were left out and its reports
    counted, so a window of 60 s read at 5 s past a minute set that minute's reports against 5 s of
    sessions: a velocity 12 times the true one."""
    _, _, issues = stores
    feed = _Feed(stores)
    policy = AlertPolicy(window_s=60, velocity_rate=0.1, velocity_min_events=2)
    start = 100 * M
    feed.sessions("g", "1.0", start, "ok", 100)
    feed.sessions("g", "1.0", start + M, "ok", 20)
    feed.crashes("g", "1.0", "aa", start + 30_000, 5)
    # 5 reports in 120 sessions (4%), whichever second of the next minute it is read at
    for now in (start + M, start + M + 5_000, start + M + 59_999):
        assert crossings(feed.counters, issues, policy, now) == []
    feed.crashes("g", "1.0", "aa", start + 40_000, 10)  # 15 in 120: 12.5%
    assert [c.kind for c in crossings(feed.counters, issues, policy, start + M + 5_000)] == [VELOCITY]


POLICY = AlertPolicy(window_s=600, velocity_rate=0.5, velocity_min_events=2, crash_free_margin=0.2,
                     crash_free_min_sessions=2)
WINDOW = 10 * M
BUILDS = ["1", "2", "3"]
SIGNATURES = ["s1", "s2"]
_bases = itertools.count(DAY_MS, DAY_MS)


class _Model:
    """The streams as lists; each condition recomputed from them at each run."""

    def __init__(self, sku: str, watched: int) -> None:
        self.sku, self.watched = sku, watched
        self.sessions: list[tuple[str, int, bool, int]] = []
        self.crashes: list[tuple[str, str, int]] = []
        self.true: set[str] = set()
        # each episode's alert key: when it closed (None: open)
        self.closed: dict[str, int | None] = {}

    @staticmethod
    def _from(t: int) -> int:
        return (t - WINDOW) // M * M  # the window's first minute, whole

    def _window(self, build: str, t: int) -> tuple[int, int]:
        inside = [(n, crashed) for b, minute, crashed, n in self.sessions
                  if b == build and self._from(t) <= minute < t]
        return sum(n for n, _ in inside), sum(n for n, crashed in inside if crashed)

    def _previous(self, build: str) -> str | None:
        first = {b: min(m for bb, m, _, _ in self.sessions if bb == b) for b, _, _, _ in self.sessions}
        before = [(first[b], b) for b in first if (first[b], b) < (first[build], build)]
        return max(before)[1] if before else None

    def run(self, t: int) -> int:
        """The episodes that start at a run at t."""
        true = set()
        # the builds with the most sessions in the window, of as many the first as text
        watched = sorted((b for b in BUILDS if self._window(b, t)[0]), key=lambda b: (-self._window(b, t)[0], b))
        watched = watched[:self.watched]
        for build in watched:
            sessions, crashed = self._window(build, t)
            for signature in SIGNATURES:
                events = sum(1 for b, s, at in self.crashes
                             if (b, s) == (build, signature) and self._from(t) <= at < t)
                if events >= 2 and Fraction(events, sessions) >= Fraction(1, 2):
                    true.add(episode_key(VELOCITY, self.sku, build, signature))
            previous = self._previous(build)
            if previous not in watched:
                continue
            was, was_crashed = self._window(previous, t)
            if sessions >= 2 and was >= 2 and Fraction(crashed, sessions) - Fraction(was_crashed, was) >= Fraction(
                    1, 5):
                true.add(episode_key(CRASH_FREE_DROP, self.sku, build))
        for key in true - self.true:
            self.closed[f"{key}:{t}"] = None
        for key in self.true - true:
            (opened,) = [a for a, closed in self.closed.items() if a.startswith(f"{key}:") and closed is None]
            self.closed[opened] = t
        starts = len(true - self.true)
        self.true = true
        return starts


# data within a window or so before the run after it
_session = st.tuples(st.just("session"), st.sampled_from(BUILDS), st.integers(0, 12), st.booleans(),
                     st.integers(1, 3))
_crash = st.tuples(st.just("crash"), st.sampled_from(BUILDS), st.sampled_from(SIGNATURES), st.integers(0, 12 * M))
_batch = st.tuples(st.lists(st.one_of(_session, _crash), max_size=10), st.integers(1, 6 * M))


# runs that watch every build the streams name, and fewer
@pytest.mark.parametrize("watched", [len(BUILDS), len(BUILDS) - 1])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_batch, min_size=1, max_size=10))
def test_alerts_are_the_episode_starts_of_a_model(stores: Stores, watched: int,
                                                  batches: list[tuple[list[tuple[object, ...]], int]]) -> None:
    _, _, issues = stores
    feed = _Feed(stores)
    sku = f"m{uuid.uuid4().hex[:12]}"
    # each example a day of its own: the ones before are out of its windows
    clock = next(_bases)
    model = _Model(sku, watched)
    policy = POLICY.model_copy(update={"watched_builds": watched})
    for data, gap in batches:
        clock += gap
        for step in data:
            match step:
                case ("session", str(build), int(back), bool(crashed), int(n)):
                    minute = clock - clock % M - back * M
                    feed.sessions(sku, build, minute, "crashed" if crashed else "ok", n)
                    model.sessions.append((build, minute, crashed, n))
                case ("crash", str(build), str(signature), int(back)):
                    feed.crashes(sku, build, signature, clock - back)
                    model.crashes.append((build, signature, clock - back))
        assert tell_alerts(feed.counters, issues, policy, clock) == model.run(clock)
        assert tell_alerts(feed.counters, issues, policy, clock) == 0  # a second run: nothing new
        assert {e.key for kind in KINDS for e in issues.episodes(kind)} == model.true
    history = issues.alert_history(sku, 0, clock + 1, None, len(model.closed) + 1)
    assert {h.alert.key: h.closed_at for h in history} == model.closed
