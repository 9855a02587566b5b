"""The listings through their handlers: reports newest first, crash groups and stats narrowed by
report fields, skus and boards paged by name, and the query-parameter checks every GET route runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from adapters.factory import Adapters
from api.requests import Posted
from api.resolver import check_names
from crashes.persistence import persist_crashes
from lambdas import capture, leaderboards, reporter
from ports import BoardSettings, BoardUpdate, Checkpoint, IndexEntry, SessionBucket
from ports.errors import InvalidField
from ports.timeutil import FIRST_MS, now_ms
from ranking import leaderboard
from ranking.model import BoardSettingsBody
from ranking.seasons import started
from ranking.tree import DEFAULT_TREE
from tests.conftest import get, ok


def ingest(adapters: Adapters, payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        capture.crash(adapters.log, adapters.spill, Posted(json.dumps(payload).encode()))
    records = adapters.log.consumer("t", "crashes").poll(10_000, 1 << 30, timeout_s=0.1)
    persist_crashes(records, adapters.documents, adapters.index, adapters.log, adapters.documents_ttl_seconds)


def listing(adapters: Adapters, **params: Any) -> dict[str, Any]:
    return ok(get(reporter.handler, "/v1/crashes", **params))


def refused(handler: Any, path: str, **params: Any) -> str:
    """The field a 400 names."""
    status, body = get(handler, path, **params)
    assert (status, body["error"]) == (400, "invalid_field"), body
    return str(body["field"])


def pages(read: Callable[[dict[str, str]], dict[str, Any]], key: str) -> list[list[Any]]:
    """Every page of a listing, following nextCursor."""
    found = [read({})]
    while found[-1]["nextCursor"] is not None:
        found.append(read({"cursor": found[-1]["nextCursor"]}))
    return [page[key] for page in found]


def test_reports_newest_first_page_by_cursor(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "n": n} for n in range(7)])
    oldest_first = [r["reportId"] for r in listing(adapters, sku="g")["reports"]]
    got = pages(lambda cursor: listing(adapters, sku="g", order="desc", limit=3, **cursor), "reports")
    assert [[r["reportId"] for r in page] for page in got] == [oldest_first[:3:-1], oldest_first[3:0:-1],
                                                                oldest_first[:1]]
    assert [r["reportId"] for r in listing(adapters, sku="g", order="asc", limit=100)["reports"]] == oldest_first


def test_a_cursor_pages_only_in_the_order_it_was_given_for(adapters: Adapters):
    ingest(adapters, [{"sku": "g"}, {"sku": "g"}])
    ascending = listing(adapters, sku="g", limit=1)["nextCursor"]
    descending = listing(adapters, sku="g", limit=1, order="desc")["nextCursor"]
    assert refused(reporter.handler, "/v1/crashes", sku="g", order="desc", cursor=ascending) == "cursor"
    assert refused(reporter.handler, "/v1/crashes", sku="g", cursor=descending) == "cursor"
    assert refused(reporter.handler, "/v1/crashes", sku="g", order="newest") == "order"


def test_an_error_code_posted_as_a_number_stays_a_number_in_the_payload(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "errorCode": 3221225477, "clientTime": 17}, {"sku": "g", "errorCode": "E42"}])
    # reports from different log partitions are indexed in no promised order
    text, number = sorted(listing(adapters, sku="g", fields="full")["reports"], key=lambda r: r["errorCode"] != "E42")
    assert number["payload"] == {"sku": "g", "errorCode": 3221225477, "clientTime": 17}
    assert (number["errorCode"], text["errorCode"], text["payload"]["errorCode"]) == ("3221225477", "E42", "E42")
    [found] = listing(adapters, sku="g", errorCode="3221225477")["reports"]
    assert found["reportId"] == number["reportId"]


def test_crash_groups_count_only_the_reports_that_match(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "platform": "ps5", "stackTrace": "#0 0x1 in a()"},
                      {"sku": "g", "platform": "pc", "stackTrace": "#0 0x1 in a()", "buildVersion": "2"},
                      {"sku": "g", "platform": "pc", "stackTrace": "#0 0x1 in b()", "crashType": "OOM"}])

    def counts(**filters: str) -> list[int]:
        return [g["count"] for g in ok(get(reporter.handler, "/v1/crash-groups", sku="g", **filters))["groups"]]

    assert counts() == [2, 1]
    assert counts(platform="ps5") == [1]
    assert counts(platform="pc") == [1, 1]
    assert counts(platform="pc", buildVersion="2") == [1]
    assert counts(crashType="OOM") == [1]
    assert counts(platform="xbox") == []


def test_stats_crashes_narrowed_by_report_fields_and_no_rate_then(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "platform": "ps5"}, {"sku": "g", "platform": "pc", "buildVersion": "2"},
                      {"sku": "g", "platform": "pc", "crashType": "OOM"}])
    adapters.counters.apply(Checkpoint("t", "sessions-0", -1, 0), {SessionBucket("g", now_ms() // 60_000 * 60_000,
                                                                                 "client"): 10})

    def totals(**filters: str) -> tuple[int, int, list[float]]:
        series = ok(get(reporter.handler, "/v1/stats", sku="g", **filters))["series"]
        return (sum(b["crashes"] for b in series), sum(b["sessions"] for b in series),
                [b["crashRate"] for b in series if b["crashRate"] is not None])

    assert totals() == (3, 10, [0.3])
    assert totals(platform="pc") == (2, 10, [])  # sessions have no platform: no rate to give
    assert totals(platform="pc", buildVersion="2") == (1, 10, [])
    assert totals(crashType="OOM") == (1, 10, [])
    assert totals(platform="xbox") == (0, 10, [])


@pytest.mark.parametrize(("path", "key"), [("/v1/stats", "series"), ("/v1/crash-groups", "groups"),
                                           ("/v1/alerts", "alerts")])
def test_a_range_ending_at_the_first_time_there_is_is_empty(adapters: Adapters, path: str, key: str):
    """Found by schemathesis: to=-62135596800000 (0001-01-01) made the default from fall before year
    1, and the answer a 500 (datetime out of range)."""
    assert ok(get(reporter.handler, path, sku="g", to=FIRST_MS)) == {key: []}
    assert ok(get(reporter.handler, path, sku="g", to=FIRST_MS + 60_000, granularity="minute")
              if path == "/v1/stats" else get(reporter.handler, path, sku="g", to=FIRST_MS + 60_000))[key] \
        == ([{"start": "0001-01-01T00:00:00.000Z", "sessions": 0, "crashes": 0, "crashRate": None}]
            if path == "/v1/stats" else [])


def test_skus_page_by_name_over_reports_and_sessions(adapters: Adapters):
    with_reports = {"a": 5_000, "c": 7_000, "d": 1_000, "f": 2_000}
    with_sessions = {"b": 60_000, "c": 120_000, "e": 0, "f": 180_000}
    adapters.index.insert_many([IndexEntry(report_key=f"{n:032x}", event_id=str(n), sku=sku, received_at=at,
                                           size_bytes=1) for n, (sku, at) in enumerate(with_reports.items())])
    adapters.counters.apply(Checkpoint("c", "s-0", -1, 0),
                            {SessionBucket(sku, at, "client"): 1 for sku, at in with_sessions.items()})
    expected = [
        {"sku": "a", "lastCrash": "1970-01-01T00:00:05.000Z", "lastSession": None},
        {"sku": "b", "lastCrash": None, "lastSession": "1970-01-01T00:01:00.000Z"},
        {"sku": "c", "lastCrash": "1970-01-01T00:00:07.000Z", "lastSession": "1970-01-01T00:02:00.000Z"},
        {"sku": "d", "lastCrash": "1970-01-01T00:00:01.000Z", "lastSession": None},
        {"sku": "e", "lastCrash": None, "lastSession": "1970-01-01T00:00:00.000Z"},
        {"sku": "f", "lastCrash": "1970-01-01T00:00:02.000Z", "lastSession": "1970-01-01T00:03:00.000Z"},
    ]
    for limit in range(1, 8):
        got = pages(lambda cursor, limit=limit: ok(get(reporter.handler, "/v1/skus", limit=limit, **cursor)), "skus")
        assert [sku for page in got for sku in page] == expected, limit
        assert all(len(page) == limit for page in got[:-1])


def test_boards_page_by_name_with_their_settings(adapters: Adapters):
    names = ["z", "weekly:eu", "all", "daily"]
    for name in names:
        adapters.ranking.put_board(BoardSettings(name, "asc" if name == "all" else "desc", "best"))
    got = pages(lambda cursor: ok(get(leaderboards.handler, "/v1/leaderboards", limit=3, **cursor)), "boards")
    assert [len(page) for page in got] == [3, 1]
    assert [b["board"] for page in got for b in page] == sorted(names)
    assert got[0][0] == {"board": "all", "order": "asc", "operator": "best", "reset": "never",
                         "ties": "shared", "keepSeasons": None, "startsAt": None, "endsAt": None,
                         "maxAttempts": None, "maxPlayers": None}
    adapters.counters.apply(Checkpoint("c", "s-0", -1, 0), {SessionBucket(sku, 0, "client"): 1 for sku in "xy"})
    sku_cursor = ok(get(reporter.handler, "/v1/skus", limit=1))["nextCursor"]
    assert refused(leaderboards.handler, "/v1/leaderboards", cursor=sku_cursor) == "cursor"  # another listing's


@pytest.mark.parametrize(("given", "field"), [
    ({"sort": ["desc"]}, "sort"),
    ({"sku": ["g"], "Limit": ["5"], "b": ["1"]}, "Limit"),  # the first unknown in sorted order
    ({"sku": ["g", "h"]}, "sku"),
    ({"": ["x"]}, ""),
])
def test_unknown_or_repeated_parameters_are_refused(given: dict[str, list[str]], field: str):
    with pytest.raises(InvalidField) as caught:
        check_names(given, frozenset({"sku", "limit"}))
    assert caught.value.field == field


def test_declared_parameters_given_once_pass():
    check_names({"sku": ["g"], "limit": ["5"]}, frozenset({"sku", "limit"}))
    check_names({}, frozenset())


def test_a_cursor_is_refused_by_a_listing_that_did_not_give_it(adapters: Adapters):
    """Found from outside: a board's top cursor paged another board, and one of the other order,
    from a position that means nothing there; a board's seasons cursor paged the skus (both "s")."""
    for name, order in (("hi", "desc"), ("lo", "asc"), ("other", "desc")):
        settings = BoardSettings(name, order, "best", reset="daily")
        for day in (1, 2):
            start = day * 86_400_000
            scores = {f"p{n}": n for n in range(3)}
            adapters.ranking.apply(Checkpoint("c", f"{name}-{day}", -1, 0), [BoardUpdate(
                settings, scores, DEFAULT_TREE.deltas((None, s) for s in scores.values()), f"{name}@{start}", start)])
    top = ok(get(leaderboards.handler, "/v1/leaderboards/hi/top", limit=1, season="1970-01-03T00:00:00Z"))
    assert ok(get(leaderboards.handler, "/v1/leaderboards/hi/top", limit=5, cursor=top["nextCursor"]))["entries"]
    for board in ("lo", "other"):
        assert refused(leaderboards.handler, f"/v1/leaderboards/{board}/top", cursor=top["nextCursor"]) == "cursor"
    seasons = ok(get(leaderboards.handler, "/v1/leaderboards/hi/seasons", limit=1))
    # and found from outside later: a board's seasons cursor paged another board's seasons
    assert ok(get(leaderboards.handler, "/v1/leaderboards/hi/seasons", cursor=seasons["nextCursor"]))["seasons"]
    assert refused(leaderboards.handler, "/v1/leaderboards/other/seasons", cursor=seasons["nextCursor"]) == "cursor"
    adapters.counters.apply(Checkpoint("c", "s-0", -1, 0), {SessionBucket(sku, 0, "client"): 1 for sku in "xy"})
    assert refused(reporter.handler, "/v1/skus", cursor=seasons["nextCursor"]) == "cursor"


def test_a_crash_listing_cursor_is_refused_by_the_builds_listing(adapters: Adapters):
    """Found from outside: reports oldest first and a sku's builds both wrote cursors of kind "r",
    and the builds read a report's id as a first-seen time."""
    ingest(adapters, [{"sku": "g"}, {"sku": "g"}])
    oldest_first = listing(adapters, sku="g", order="asc", limit=1)
    assert refused(reporter.handler, "/v1/releases", sku="g", cursor=oldest_first["nextCursor"]) == "cursor"


def test_a_top_cursor_is_refused_with_an_offset_or_another_season(adapters: Adapters):
    """Found from outside: `offset=0` passed beside a cursor (0 was the route's default), and a
    `season` other than the cursor's was dropped for the cursor's."""
    settings = BoardSettings("b", "desc", "best", reset="daily")
    for day in (1, 2):
        start = day * 86_400_000
        scores = {f"p{n}": n for n in range(3)}
        adapters.ranking.apply(Checkpoint("c", f"b-{day}", -1, 0), [BoardUpdate(
            settings, scores, DEFAULT_TREE.deltas((None, s) for s in scores.values()), f"b@{start}", start)])
    season = "1970-01-03T00:00:00Z"
    cursor = ok(get(leaderboards.handler, "/v1/leaderboards/b/top", limit=1, season=season))["nextCursor"]
    assert refused(leaderboards.handler, "/v1/leaderboards/b/top", cursor=cursor, offset=0) == "offset"
    assert refused(leaderboards.handler, "/v1/leaderboards/b/top", cursor=cursor,
                   season="1970-01-02T00:00:00Z") == "season"
    assert [e["playerId"] for e in ok(get(leaderboards.handler, "/v1/leaderboards/b/top", cursor=cursor,
                                          season=season))["entries"]] == ["p1", "p0"]


def test_a_first_season_cursor_goes_on_in_it_once_a_wipe_started_another(adapters: Adapters):
    """Found from outside: a cursor of a board's first season (read without season=) named none,
    and once a wipe had started the next it paged that one."""
    settings = BoardSettings("f")
    old = {f"p{n}": n for n in range(5)}
    adapters.ranking.apply(Checkpoint("c", "f-1", -1, 0), [BoardUpdate(
        settings, old, DEFAULT_TREE.deltas((None, s) for s in old.values()), "f", None)])
    first = ok(get(leaderboards.handler, "/v1/leaderboards/f/top", limit=2))
    wiped_at = 86_400_000
    wiped = replace(settings, epochs=started(settings, wiped_at, settings.reset))
    adapters.ranking.put_board(wiped)
    adapters.ranking.apply(Checkpoint("c", "f-2", -1, 0), [BoardUpdate(
        wiped, {"n": 3}, DEFAULT_TREE.deltas([(None, 3)]), f"f@{wiped_at}", wiped_at)])
    for season in ({}, {"season": "1970-01-01T00:00:00Z"}):
        rest = ok(get(leaderboards.handler, "/v1/leaderboards/f/top", cursor=first["nextCursor"], **season))
        assert [(e["playerId"], e["rank"]) for e in rest["entries"]] == [("p2", 3), ("p1", 4), ("p0", 5)]


def test_a_schedule_spelt_as_its_alias_is_no_change_of_schedule(adapters: Adapters):
    """Found from outside: a PUT of `0 0 * * *` on a daily board started a season, and the
    board's players were gone from its current one."""
    leaderboard.configure(adapters.ranking, "d", BoardSettingsBody.model_validate({"reset": "daily"}))
    for same in ("0 0 * * *", "daily"):
        leaderboard.configure(adapters.ranking, "d", BoardSettingsBody.model_validate({"reset": same}))
    stored = adapters.ranking.get_board("d")
    assert stored is not None and stored.epochs == ()
    leaderboard.configure(adapters.ranking, "d", BoardSettingsBody.model_validate({"reset": "weekly"}))
    stored = adapters.ranking.get_board("d")
    assert stored is not None and len(stored.epochs) == 2
    # found in review: a schedule stored as sent before spellings were made one is the same one too
    adapters.ranking.put_board(BoardSettings("n", reset="0 6 * * 5\n"))
    leaderboard.configure(adapters.ranking, "n", BoardSettingsBody.model_validate({"reset": "0 6 * * 5\n"}))
    stored = adapters.ranking.get_board("n")
    assert stored is not None and stored.epochs == ()


def test_a_subscore_board_answers_each_entry_with_its_subscore(adapters: Adapters):
    """Found from outside: a subscore was never returned (an incr board's sums could not be read
    back), only carried in a cursor."""
    settings = BoardSettings("s", ties="subscore")
    records = {"a": (5, 7), "b": (5, -2), "c": (9, 0)}
    adapters.ranking.apply(Checkpoint("c", "s-1", -1, 0), [BoardUpdate(
        settings, {p: s for p, (s, _) in records.items()}, DEFAULT_TREE.deltas((None, s) for s, _ in records.values()),
        "s", None, tiebreaks={p: t for p, (_, t) in records.items()})])
    top = ok(get(leaderboards.handler, "/v1/leaderboards/s/top"))["entries"]
    assert [(e["playerId"], e["rank"], e["subscore"]) for e in top] == [("c", 1, 0), ("a", 2, 7), ("b", 3, -2)]
    assert ok(get(leaderboards.handler, "/v1/leaderboards/s/players/b"))["subscore"] == -2
    plain = BoardSettings("p")
    adapters.ranking.apply(Checkpoint("c", "p-1", -1, 0),
                           [BoardUpdate(plain, {"a": 5}, DEFAULT_TREE.deltas([(None, 5)]), "p", None)])
    assert set(ok(get(leaderboards.handler, "/v1/leaderboards/p/players/a"))) == {"rank", "playerId", "score",
                                                                                 "metadata"}


def test_an_unknown_parameter_is_named_within_a_bound_however_long_its_name():
    """Found from outside: a name of 20,000 characters came back twice in a 40 KB answer."""
    with pytest.raises(InvalidField) as caught:
        check_names({"x" * 20_000: [""]}, frozenset({"sku"}))
    assert len(str(caught.value)) < 300 and caught.value.field == "x" * 63 + "…"
