"""A name that is "." or ".." is a dot segment to a browser's URL parser, even escaped (%2E): put in
a path it asks for another route (/v1/leaderboards/. is the board listing, ../.. is /v1/). Boards
were so named before such names were refused, and sort first. The dashboard once picked "." as the
board to show (the panel failed, its error wiped by the next refresh) and followed ?board=.. to /v1/."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, expect

from adapters.factory import build
from adapters.settings import Settings
from local_runtime.process import Serve
from ports import BoardSettings
from tests.e2e.conftest import running

BOARD = "dots-board"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running("embedded", tmp_path_factory.mktemp("dots")) as server:
        # as a deployment kept them from before the names were refused
        stored = build(Settings(data_dir=server.data_dir))
        for board in (".", ".."):
            stored.ranking.add_board(BoardSettings(board))
        stored.close()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.post("/v1/scores", json={"board": BOARD, "playerId": "p1", "score": 7}).status_code == 202
            deadline = time.monotonic() + 30
            while len(client.get("/v1/leaderboards").json()["boards"]) < 3:
                assert time.monotonic() < deadline, "the boards were not listed within 30 s"
                time.sleep(0.1)
        yield server


def requested_paths(browser: Browser, url: str) -> tuple[list[str], str, str]:
    """The API paths the page asked for, the board it shows and what its panel says, once it settled."""
    page = browser.new_page()
    paths: list[str] = []
    page.on("request", lambda request: paths.append(httpx.URL(request.url).path))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    shown, status = page.input_value("#board"), page.text_content("#board-info") or ""
    page.close()
    return [p for p in paths if p.startswith("/v1/")], shown, status


def test_the_board_picked_first_is_one_a_url_can_name(served: Serve, browser: Browser) -> None:
    page = browser.new_page()
    page.goto(served.url)
    expect(page.locator("body[data-ready]")).to_have_count(1)
    assert page.input_value("#board") == BOARD
    expect(page.locator("#leaderboard tbody tr")).to_have_count(1)
    page.close()


@pytest.mark.parametrize("name", [".", ".."])
def test_a_dot_segment_board_in_the_link_asks_for_no_other_route(served: Serve, browser: Browser, name: str) -> None:
    paths, shown, status = requested_paths(browser, f"{served.url}/?board={name}&player=..")
    assert shown == name
    assert all(p.startswith(("/v1/skus", "/v1/leaderboards")) for p in paths), paths
    assert [p for p in paths if p.startswith("/v1/leaderboards/")] == [], paths
    assert f"board {name} cannot be named in a URL" in status
