"""The dashboard's leaderboard panel in a real browser (as test_dashboard) against `blackbox serve`
on `embedded`: the panel reads the same routes on either profile, and test_dashboard opens it on
both. Each test here is a defect found from outside, seen failing before its fix."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from local_runtime.process import Serve
from tests.e2e.conftest import eventually, running
from tests.e2e.test_dashboard import state, wait_ready


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running("embedded", tmp_path_factory.mktemp("boards")) as server:
        yield server


def scored(client: httpx.Client, board: str, scores: list[dict[str, Any]], headers: dict[str, str] | None = None,
           ) -> None:
    """Posts `scores` to `board` and waits until the board's current season counts their players."""
    def players() -> int:  # a board is made by its first score
        found = client.get(f"/v1/leaderboards/{board}", headers=headers)
        return int(found.json()["players"]) if found.status_code == 200 else 0

    expected = players() + len({s["playerId"] for s in scores})
    posted = [{"board": board, **score} for score in scores]
    assert client.post("/v1/scores", json=posted, headers=headers).status_code == 202
    assert eventually(players, lambda n: n == expected) == expected


def wiped(client: httpx.Client, board: str) -> None:
    """Wipes `board` and waits for its new season to start (a second after the request)."""
    response = client.delete(f"/v1/leaderboards/{board}")
    assert response.status_code == 200, response.text
    start = datetime.fromisoformat(response.json()["season"]).timestamp()
    time.sleep(max(0.0, start - time.time()) + 0.05)


def two_seasons(serve: Serve, board: str, first: str, second: str) -> None:
    """A board that never resets, `first` scored 7 in its first season, wiped, `second` 9 in the next."""
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.put(f"/v1/leaderboards/{board}", json={"reset": "never"}).status_code == 201
        scored(client, board, [{"playerId": first, "score": 7}])
        wiped(client, board)
        scored(client, board, [{"playerId": second, "score": 9}])


def opened(browser: Browser, url: str, at_ms: int | None = None, **options: Any) -> Page:
    """The dashboard at `url`, its clock at `at_ms` when given (its timers still run)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, **options)
    if at_ms is not None:
        page.clock.set_fixed_time(at_ms / 1000)
    page.goto(url)
    wait_ready(page, [])
    return page


def fails_once(page: Page, pattern: str) -> None:
    """The first request to `pattern` answered 500, the ones after it served."""
    failures = [1]

    def once(route: Route) -> None:
        if failures:
            failures.pop()
            route.fulfill(status=500, body='{"error": "internal", "message": "boom"}', content_type="application/json")
        else:
            route.continue_()

    page.route(pattern, once)


def asked(page: Page, field: str, value: str) -> None:
    """`value` typed in the board form's `field` (board or player), and the form sent."""
    page.fill(f"#{field}", value)
    page.click("#board-form button[type=submit]")


def utc(start: str) -> str:
    """A season's start as the panel labels it: UTC, to the millisecond where it has one."""
    at = datetime.fromisoformat(start).astimezone(UTC)
    text = at.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{at.microsecond // 1000:03d} UTC" if at.microsecond else f"{text} UTC"


# found from outside: "from Dec 1, 01:08 AM" in the browser's zone, two wipes a second apart read
# the same, and a daily season's 00:00 UTC read "Nov 30, 04:00 PM" in Los Angeles
def test_seasons_are_told_apart_in_utc_whatever_the_browsers_zone(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.put("/v1/leaderboards/wiped-often", json={"reset": "daily"}).status_code == 201
        scored(client, "wiped-often", [{"playerId": "w0", "score": 1}])
        for n in (1, 2):
            wiped(client, "wiped-often")
            scored(client, "wiped-often", [{"playerId": f"w{n}", "score": n}])
        seasons = client.get("/v1/leaderboards/wiped-often/seasons").json()["seasons"]
        next_reset = client.get("/v1/leaderboards/wiped-often").json()["nextReset"]
    assert len(seasons) == 3
    page = opened(browser, f"{serve.url}/?board=wiped-often", timezone_id="America/Los_Angeles")
    labels = page.locator("#season option").all_text_contents()
    # found from outside: the current season was listed twice, as "current" and by its start
    assert labels == [f"current, from {utc(seasons[0])}", *(f"from {utc(s)}" for s in seasons[1:])]
    expect(page.locator("#board-info")).to_contain_text(f"this season from {utc(seasons[0])}")
    expect(page.locator("#board-info")).to_contain_text(f"next reset {utc(next_reset)}")
    page.close()


def test_the_current_season_is_listed_once_also_while_a_past_one_is_shown(serve: Serve, browser: Browser):
    two_seasons(serve, "listed-once", "before", "now")
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "never-wiped", [{"playerId": "only", "score": 1}])
        current = client.get("/v1/leaderboards/listed-once").json()["season"]
    page = opened(browser, f"{serve.url}/?board=never-wiped")
    assert page.locator("#season option").all_text_contents() == ["current"]
    assert page.locator("#season").is_disabled()
    page.close()
    # from a review: linked by its start (as the picker once offered it), it was listed again
    for chosen in ("", "0", current):
        page = opened(browser, f"{serve.url}/?{urlencode({'board': 'listed-once', 'season': chosen})}")
        assert page.locator("#season option").all_text_contents() == [f"current, from {utc(current)}", "the first"]
        assert page.locator("#season").input_value() == {"": "", "0": "1970-01-01T00:00:00.000Z", current: ""}[chosen]
        page.close()


# found from outside: a season linked as the API's example spells it (…T00:00:00Z), or by its epoch
# milliseconds, was shown but not picked, and looking up a player then asked the current season
def test_a_linked_season_is_picked_however_it_is_spelt_and_kept_by_a_lookup(serve: Serve, browser: Browser):
    two_seasons(serve, "linked", "first", "second")
    for spelt in ("1970-01-01T00:00:00Z", "0"):
        page = opened(browser, f"{serve.url}/?{urlencode({'board': 'linked', 'season': spelt})}")
        assert page.locator("#season").input_value() == "1970-01-01T00:00:00.000Z"
        asked(page, "player", "first")
        expect(page.locator("#board-info")).to_contain_text("first: rank 1, score 7")
        assert state(page)["season"] == "1970-01-01T00:00:00.000Z"
        page.close()
    # a season the listing does not hold (no score was written to it) is picked all the same
    page = opened(browser, f"{serve.url}/?{urlencode({'board': 'linked', 'season': '1000'})}")
    assert page.locator("#season").input_value() == "1970-01-01T00:00:01.000Z"
    expect(page.locator("#board-info")).to_contain_text("0 players")
    page.close()


# found from outside: a board that failed to load left the board before on screen, under the new
# board's name, and its error was cleared by the next live refresh
def test_a_board_that_cannot_be_shown_clears_the_panel_and_says_why(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "shown-first", [{"playerId": "here", "score": 3}])
    page = opened(browser, f"{serve.url}/?board=shown-first")
    expect(page.locator("#leaderboard tbody")).to_contain_text("here")
    asked(page, "board", "no-such-board")
    expect(page.locator("#board-info")).to_contain_text("404")
    expect(page.locator("#leaderboard tbody")).not_to_contain_text("here")
    assert page.locator("#season option").all_text_contents() == ["current"]
    page.wait_for_timeout(6000)  # a live refresh (every 5 s) leaves it told
    expect(page.locator("#board-info")).to_contain_text("404")
    page.close()


# found from outside: the live view refreshed the crash panels, never the board
def test_the_live_view_refreshes_the_board(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "live-board", [{"playerId": "early", "score": 1}])
        page = opened(browser, f"{serve.url}/?board=live-board")
        expect(page.locator("#board-info")).to_contain_text("1 players")
        scored(client, "live-board", [{"playerId": "late", "score": 2}])
    expect(page.locator("#leaderboard tbody")).to_contain_text("late", timeout=15_000)
    expect(page.locator("#board-info")).to_contain_text("2 players")
    page.close()


# found from outside: a tournament's limits, its window and its ties were never shown, nor that its
# window had closed
def test_a_tournaments_limits_window_and_ties_are_shown(serve: Serve, browser: Browser):
    # the window closes in an hour: the browser's clock passes it, not a race with a slow page
    ends = round(time.time() * 1000) + 3_600_000
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        settings = {"maxAttempts": 3, "maxPlayers": 50, "ties": "earliest", "endsAt": str(ends)}
        assert client.put("/v1/leaderboards/cup", json=settings).status_code == 201
        ends_at = client.get("/v1/leaderboards/cup").json()["endsAt"]
    page = opened(browser, f"{serve.url}/?board=cup", at_ms=ends - 1000)
    note = page.locator("#board-info")
    for told in ("ties earliest", "3 attempts a player", "50 players", f"closes {utc(ends_at)}"):
        expect(note).to_contain_text(told)
    page.close()
    page = opened(browser, f"{serve.url}/?board=cup", at_ms=ends + 1000)
    expect(page.locator("#board-info")).to_contain_text(f"closed {utc(ends_at)}")
    page.close()


# found from outside: scores past 2^53 (the contract's int64) were shown rounded, two scores as one
def test_scores_past_two_to_the_53_are_shown_exactly(serve: Serve, browser: Browser):
    big = [2**63 - 1, 2**63 - 2, 2**53 + 1]
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "big-scores", [{"playerId": f"b{n}", "score": s} for n, s in enumerate(big)])
    page = opened(browser, f"{serve.url}/?board=big-scores&player=b0")
    rows = page.locator("#leaderboard tbody tr").all_text_contents()
    assert [row.removeprefix(str(rank + 1)) for rank, row in enumerate(rows)] == [f"b{n}{s}" for n, s in enumerate(big)]
    expect(page.locator("#board-info")).to_contain_text(f"b0: rank 1, score {2**63 - 1}")
    page.close()


# found from outside: a player whose id begins with a space was looked up without it
def test_a_player_id_is_looked_up_as_typed(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "spaced", [{"playerId": " lead", "score": 10}, {"playerId": "lead", "score": 5}])
    page = opened(browser, f"{serve.url}/?board=spaced")
    asked(page, "player", " lead")
    expect(page.locator("#board-info")).to_contain_text(" lead: rank 1, score 10")
    page.close()


# found from outside: with a server key, which reads every leaderboard route, the page stopped at
# its first call (/v1/skus, 403) and never showed the board
def test_a_server_key_shows_the_board(browser: Browser, tmp_path_factory: pytest.TempPathFactory):
    keys = {"BLACKBOX_API_KEYS__SERVER": '["boards-server"]', "BLACKBOX_API_KEYS__READ": '["boards-read"]'}
    with running("embedded", tmp_path_factory.mktemp("keyed-boards"), keys) as keyed:
        with httpx.Client(base_url=keyed.url, timeout=30) as client:
            scored(client, "keyed", [{"playerId": "k1", "score": 5}], {"x-api-key": "boards-server"})
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{keyed.url}/?board=keyed")
        page.fill("#key", "boards-server")
        page.click("#controls button[type=submit]")
        expect(page.locator("#leaderboard tbody")).to_contain_text("k1")
        expect(page.locator("#status")).to_contain_text("403")  # the crash panels are the read key's
        page.wait_for_timeout(6000)  # from a review: a live refresh cleared it, the sku box left empty
        expect(page.locator("#status")).to_contain_text("/v1/skus: 403")
        page.close()


# found from outside: the panel showed a board's top 20, with no way to see more nor sign of more
def test_more_of_the_top_is_shown_as_asked_and_kept_by_the_live_view(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "long-board", [{"playerId": f"l{n:02d}", "score": n} for n in range(45)])
    page = opened(browser, f"{serve.url}/?board=long-board")
    rows = page.locator("#leaderboard tbody tr")
    expect(rows).to_have_count(20)
    page.click("#board-more")
    expect(rows).to_have_count(40)
    page.wait_for_timeout(6000)  # a live refresh (every 5 s) keeps them
    expect(rows).to_have_count(40)
    page.click("#board-more")
    expect(rows).to_have_count(45)
    expect(page.locator("#board-more")).to_be_hidden()  # the board's last is shown
    assert rows.nth(44).text_content() == "45l000"
    page.close()


# from a review: a live refresh's load of the board chosen before, answered late, drew that board
# under the name of the one chosen since
def test_a_late_answer_for_the_board_chosen_before_is_not_drawn(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "before", [{"playerId": "a1", "score": 1}])
        scored(client, "since", [{"playerId": "b1", "score": 2}])
    page = opened(browser, f"{serve.url}/?board=before")
    held: list[Route] = []
    page.route("**/v1/leaderboards/before/top*", lambda route: route.continue_() if held else held.append(route))
    for _ in range(200):  # a live refresh (every 5 s) asks for its top, held
        if held:
            break
        page.wait_for_timeout(100)
    assert held
    asked(page, "board", "since")
    expect(page.locator("#leaderboard tbody")).to_contain_text("b1")
    held[0].continue_()
    seen = []
    for _ in range(20):  # until well after the late answer came, and before the next refresh redraws
        seen.append(page.locator("#leaderboard tbody").text_content())
        page.wait_for_timeout(100)
    assert not [rows for rows in seen if "a1" in (rows or "")]
    page.close()


# from a review: a load that failed once emptied the season picker, and the next lookup asked the
# current season
def test_a_failed_load_keeps_the_season_chosen(serve: Serve, browser: Browser):
    two_seasons(serve, "kept-season", "old", "new")
    page = opened(browser, f"{serve.url}/?board=kept-season&season=0")
    fails_once(page, "**/v1/leaderboards/kept-season/seasons*")
    expect(page.locator("#board-info")).to_contain_text("500", timeout=10_000)
    assert page.locator("#season").input_value() == "1970-01-01T00:00:00.000Z"
    asked(page, "player", "old")
    expect(page.locator("#board-info")).to_contain_text("old: rank 1, score 7")
    assert state(page)["season"] == "1970-01-01T00:00:00.000Z"
    page.close()


# from a review: with the crash panels failing at once, each live refresh ended while its board
# still loaded, and the next began another: a load more every 5 s
def test_board_loads_do_not_pile_up_behind_failing_crash_panels(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "slow-board", [{"playerId": "s1", "score": 1}])
    page = opened(browser, f"{serve.url}/?board=slow-board&sku=some:pc")
    held: list[Route] = []
    page.route("**/v1/stats*", lambda route: route.fulfill(status=403, body='{"error": "forbidden"}',
                                                          content_type="application/json"))
    # a function of its own: Playwright takes no builtin method as a handler
    page.route("**/v1/leaderboards/slow-board/top*", lambda route: held.append(route))  # noqa: PLW0108
    page.wait_for_timeout(11_000)  # two live refreshes
    assert len(held) == 1
    for route in held:
        route.abort()
    page.close()


# from a review: the pickers' failure, kept told so that a server key's 403 stays, was told for as
# long as the page stayed open after a failure that happened once
def test_a_pickers_failure_that_happened_once_is_not_told_for_ever(serve: Serve, browser: Browser):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        scored(client, "blip-board", [{"playerId": "p1", "score": 1}])
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    fails_once(page, "**/v1/skus*")
    page.goto(f"{serve.url}/?board=blip-board")
    expect(page.locator("#status")).to_contain_text("/v1/skus: 500")
    expect(page.locator("#status")).to_have_text("", timeout=12_000)  # the next live refresh lists them
    page.close()
