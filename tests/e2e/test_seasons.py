"""Seasons end to end through `blackbox serve` on both profiles: scores stream in across a reset
(a board that resets every minute), and each lands in the season current when it was received;
the closed season stays as it ended while the next fills, and its final top reaches a webhook
once; deletions and a friends list read the current season."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from typing import Any

import httpx
import pytest

from local_runtime.process import Serve
from ports.timeutil import parse_epoch_ms
from tests.e2e.conftest import Receiver, running, verified

BOARD = "arena:minutely"
MINUTE_MS = 60_000
# scores sent this long before and after the reset
AROUND_S = 4.0


SECRET = "the-studio-s-season-secret"
# a season's top is told this long after its end (6 minutes by default)
TELL_AFTER_S = 2


@pytest.fixture(scope="module")
def hook() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture(scope="module", params=["embedded", "services"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           hook: Receiver) -> Iterator[Serve]:
    env = {"BLACKBOX_WEBHOOKS__ALLOW_PRIVATE": "true", "BLACKBOX_SEASON_END__AFTER_S": str(TELL_AFTER_S),
           "BLACKBOX_SEASON_END__LOOK_EVERY_S": "1"}
    with running(request.param, tmp_path_factory.mktemp(f"seasons-{request.param}"), env) as serve:
        yield serve


def stream_across_a_reset(client: httpx.Client) -> tuple[int, list[tuple[str, float, float]]]:
    """One score a player, sent from AROUND_S before the next minute to AROUND_S after it: the
    reset's time, and each player with the window its request was sent and answered in."""
    now = time.time()
    reset = (int(now * 1000) // MINUTE_MS + 1) * MINUTE_MS
    if reset / 1000 - now < AROUND_S + 1:  # too close to stream from before it
        reset += MINUTE_MS
    time.sleep(reset / 1000 - AROUND_S - time.time())
    sent = []
    while time.time() < reset / 1000 + AROUND_S:
        player = f"p{len(sent):04d}"
        began = time.time()
        answer = client.post("/v1/scores", json={"board": BOARD, "playerId": player, "score": len(sent)})
        assert answer.status_code == 202, answer.text
        sent.append((player, began * 1000, time.time() * 1000))
        time.sleep(0.05)
    return reset, sent


def players(client: httpx.Client, season: int, expected: Collection[str] = ()) -> dict[str, int]:
    """The season's records once the `expected` players' are readable (a count would be reached
    early by a request sent before the reset and received after it, a later one not yet applied)."""
    deadline = time.monotonic() + 60
    while True:
        entries = client.get(f"/v1/leaderboards/{BOARD}/top", params={"limit": 1000, "season": season}).json()
        found = {e["playerId"]: e["score"] for e in entries["entries"]}
        if set(expected) <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_scores_land_in_the_season_they_were_received_in_and_the_closed_one_stays(server: Serve,
                                                                                   hook: Receiver) -> None:
    path = f"/{server.profile}"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.put("/v1/webhooks/seasons", json={"url": f"{hook.url}{path}", "secret": SECRET,
                                                         "alerts": ["season-end"]}).status_code == 201
        assert client.put(f"/v1/leaderboards/{BOARD}", json={"reset": "* * * * *"}).status_code == 201
        reset, sent = stream_across_a_reset(client)
        before = [p for p, _, answered in sent if answered < reset]
        after = [p for p, began, _ in sent if began >= reset]
        assert len(before) > 10 and len(after) > 10
        old = players(client, reset - MINUTE_MS, before)
        new = players(client, reset, after)
        assert set(before) <= set(old) and not set(before) & set(new)
        assert set(after) <= set(new) and not set(after) & set(old)
        assert set(old) | set(new) == {p for p, _, _ in sent} and not set(old) & set(new)
        board: dict[str, Any] = client.get(f"/v1/leaderboards/{BOARD}").json()
        assert parse_epoch_ms(board["season"]) >= reset and parse_epoch_ms(board["nextReset"]) > time.time() * 1000
        listed = client.get(f"/v1/leaderboards/{BOARD}/seasons").json()["seasons"]
        assert [parse_epoch_ms(s) for s in listed[-2:]] == [reset, reset - MINUTE_MS]

        # the closed season is frozen: a late update of one of its players lands in a later one
        late = before[0]
        assert client.post("/v1/scores", json={"board": BOARD, "playerId": late, "score": -7}).status_code == 202
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seasons = [parse_epoch_ms(s) for s in client.get(f"/v1/leaderboards/{BOARD}/seasons").json()["seasons"]]
            if any(players(client, season).get(late) == -7 for season in seasons if season >= reset):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the late update never landed")
        assert players(client, reset - MINUTE_MS, before) == old

        # its end told once, with its final top, to the webhook that takes season ends
        deadline = time.monotonic() + 60
        while not hook.at(path) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the job runs every second, the sender too: a second telling would be here by now
        ((headers, told),) = hook.at(path)
        raw = next(body for p, _, body in hook.got if p == path)
        assert verified(headers, raw, SECRET)
        final = client.get(f"/v1/leaderboards/{BOARD}/top", params={"season": reset - MINUTE_MS}).json()["entries"]
        assert told["kind"] == "season-end" and told["alert"]["board"] == BOARD and told["alert"]["top"] == final


def test_a_deleted_record_leaves_the_board_and_a_friends_list_reads_ranks_and_metadata(server: Serve) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        scores = [{"board": "friends", "playerId": p, "score": s} for p, s in (("ana", 30), ("bo", 50), ("cy", 50))]
        scores[0]["metadata"] = {"car": "red", "lap": 3}
        assert client.post("/v1/scores", json=scores).status_code == 202
        deadline = time.monotonic() + 30
        while client.get("/v1/leaderboards/friends").json().get("players") != 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        ranks = client.post("/v1/leaderboards/friends/players:ranks", json={"playerIds": ["ana", "cy", "zed", "bo"]})
        assert ranks.json() == {"entries": [{"rank": 1, "playerId": "bo", "score": 50, "metadata": None},
                                            {"rank": 1, "playerId": "cy", "score": 50, "metadata": None},
                                            {"rank": 3, "playerId": "ana", "score": 30,
                                             "metadata": {"car": "red", "lap": 3}}],
                                "missing": ["zed"]}
        deleted = client.delete("/v1/leaderboards/friends/players/bo")
        assert deleted.status_code == 202 and deleted.json() == {"board": "friends", "playerId": "bo", "season": None}
        while client.get("/v1/leaderboards/friends").json()["players"] != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get("/v1/leaderboards/friends/players/ana").json()["rank"] == 2
        assert client.get("/v1/leaderboards/friends/players/bo").status_code == 404
        assert client.delete("/v1/leaderboards/nowhere/players/bo").status_code == 404
