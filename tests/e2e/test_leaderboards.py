"""Leaderboards end to end through `blackbox serve`: 20,000 score updates over several boards,
then every answer of the leaderboard API equals the brute-force answer."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx

from local_runtime.process import Serve
from ports.limits import INT64_MAX, INT64_MIN
from tests.brute import BruteBoard
from tests.e2e.conftest import eventually

UPDATES = 20_000
BATCH = 100
# board → (order, operator); None: created by its first score, so desc/best
BOARDS: dict[str, tuple[str, str] | None] = {
    "season-7:ranked": ("desc", "best"),
    "speedrun.any-pct": None,
    "time-trial": ("asc", "best"),
    "xp-total": ("desc", "incr"),
    "latest-rating": ("desc", "set"),
}
PLAYERS = [f"player-{i:04d}" for i in range(1500)]


def value(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.02:
        return rng.choice([INT64_MIN, INT64_MAX, -1, 0])
    if roll < 0.1:
        return rng.randint(-1000, 1000)  # negative scores and plenty of ties
    return rng.randint(0, 50_000)


async def post(client: httpx.AsyncClient, batch: list[dict[str, Any]]) -> None:
    response = await client.post("/v1/scores", json=batch)
    assert response.status_code == 202 and response.json() == {"accepted": len(batch)}, response.text


async def send(base_url: str, batches: list[list[dict[str, Any]]], ordered: list[list[dict[str, Any]]]) -> None:
    limit = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        async def one(batch: list[dict[str, Any]]) -> None:
            async with limit:
                await post(client, batch)

        async def in_order() -> None:
            for batch in ordered:
                await post(client, batch)

        await asyncio.gather(in_order(), *(one(b) for b in batches))


def top_all(client: httpx.Client, board: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    while True:
        page = client.get(f"/v1/leaderboards/{board}/top", params={"offset": len(entries), "limit": 1000})
        assert page.status_code == 200, page.text
        entries += page.json()["entries"]
        if len(page.json()["entries"]) < 1000:
            return entries


def test_20000_updates_then_every_answer_equals_brute_force(serve: Serve):
    rng = random.Random(11)
    brutes = {board: BruteBoard(*(settings or ("desc", "best"))) for board, settings in BOARDS.items()}
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        for board, settings in BOARDS.items():
            if settings is not None:
                body = {"order": settings[0], "operator": settings[1]}
                assert client.put(f"/v1/leaderboards/{board}", json=body).json() == {"board": board, **body,
                                                                                     "reset": "never", "ties": "shared",
                                                                                     "keepSeasons": None,
                                                                                     "startsAt": None, "endsAt": None,
                                                                                     "maxAttempts": None,
                                                                                     "maxPlayers": None}

    updates = [{"board": rng.choice(list(BOARDS)), "playerId": rng.choice(PLAYERS), "score": value(rng)}
               for _ in range(UPDATES)]
    for u in updates:
        brutes[u["board"]].apply(u["playerId"], u["score"])
    # set, and incr where it saturates at the int64 bounds, depend on order: those boards' updates
    # are sent one request after the other; best does not care
    in_order = {board for board, brute in brutes.items() if brute.operator != "best"}
    ordered = [u for u in updates if u["board"] in in_order]
    unordered = [u for u in updates if u["board"] not in in_order]
    asyncio.run(send(
        serve.url,
        [unordered[i : i + BATCH] for i in range(0, len(unordered), BATCH)],
        [ordered[i : i + BATCH] for i in range(0, len(ordered), BATCH)],
    ))

    with httpx.Client(base_url=serve.url, timeout=60) as client:
        expected = {board: brute.ordered() for board, brute in brutes.items()}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(top_all(client, b) != expected[b] for b in BOARDS):
            time.sleep(0.5)
        for board, brute in brutes.items():
            assert top_all(client, board) == expected[board]
            info = client.get(f"/v1/leaderboards/{board}").json()
            assert info["players"] == len(brute.scores)
            assert (info["order"], info["operator"]) == (brute.order, brute.operator)
            for index, entry in enumerate(expected[board]):
                if index % 7 == 0:  # a sample keeps the test quick; top_all covered everyone
                    player = client.get(f"/v1/leaderboards/{board}/players/{entry['playerId']}").json()
                    assert player == entry
                    around = client.get(f"/v1/leaderboards/{board}/around/{entry['playerId']}",
                                        params={"radius": 3}).json()["entries"]
                    assert around == expected[board][max(0, index - 3) : index + 4]
            for probe in [INT64_MIN, -5, 0, 1234, 25_000, INT64_MAX]:
                got = client.get(f"/v1/leaderboards/{board}/rank", params={"score": probe}).json()
                assert got == {"score": probe, "rank": brute.rank(probe)}
        assert client.get("/v1/leaderboards/nope").status_code == 404
        assert client.get(f"/v1/leaderboards/{next(iter(BOARDS))}/players/nobody").status_code == 404


def test_ties_rank_each_player_and_a_ban_hides_one_on_every_board(serve: Serve):
    """Through the API: the first to reach a score ranks above the later, a subscore breaks a tie,
    and a banned player leaves both boards (and the friends list) until the ban is lifted."""
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        assert client.put("/v1/leaderboards/firsts", json={"ties": "earliest"}).json()["ties"] == "earliest"
        assert client.put("/v1/leaderboards/arena", json={"ties": "subscore"}).json()["ties"] == "subscore"
        assert client.put("/v1/leaderboards/arena", json={"ties": "shared"}).status_code == 400
        for player in ("late", "early"):  # in order, milliseconds apart: "late" reaches 50 first
            assert client.post("/v1/scores", json={"board": "firsts", "playerId": player, "score": 50}).status_code \
                == 202
            time.sleep(0.01)
        assert client.post("/v1/scores", json=[
            {"board": "arena", "playerId": "a", "score": 30, "subscore": 9},
            {"board": "arena", "playerId": "b", "score": 30, "subscore": 12},
            {"board": "arena", "playerId": "early", "score": 10}]).status_code == 202

        def top(board: str) -> list[tuple[int, str]]:
            return [(e["rank"], e["playerId"]) for e in client.get(f"/v1/leaderboards/{board}/top").json()["entries"]]

        assert eventually(lambda: top("firsts"), lambda got: len(got) == 2) == [(1, "late"), (2, "early")]
        assert eventually(lambda: top("arena"), lambda got: len(got) == 3) == [(1, "b"), (2, "a"), (3, "early")]
        assert client.get("/v1/leaderboards/arena/rank", params={"score": 30, "subscore": 10}).json()["rank"] == 2

        banned = client.put("/v1/bans/early")
        assert banned.status_code == 202 and banned.json() == {"playerId": "early", "banned": True, "records": 2}
        assert eventually(lambda: top("firsts"), lambda got: len(got) == 1) == [(1, "late")]
        assert eventually(lambda: top("arena"), lambda got: len(got) == 2) == [(1, "b"), (2, "a")]
        assert client.get("/v1/leaderboards/firsts/players/early").status_code == 404
        friends = client.post("/v1/leaderboards/firsts/players:ranks", json={"playerIds": ["early", "late"]}).json()
        assert friends["missing"] == ["early"]
        assert client.get("/v1/bans/early").json()["playerId"] == "early"
        assert [b["playerId"] for b in client.get("/v1/bans").json()["bans"]] == ["early"]
        # a banned player's update is kept, hidden
        assert client.post("/v1/scores", json={"board": "arena", "playerId": "early", "score": 99}).status_code == 202
        assert client.delete("/v1/bans/early").status_code == 202
        assert eventually(lambda: top("arena"), lambda got: len(got) == 3) == [(1, "early"), (2, "b"), (3, "a")]
        assert eventually(lambda: top("firsts"), lambda got: len(got) == 2) == [(1, "late"), (2, "early")]
        assert client.delete("/v1/bans/early").json() == {"playerId": "early", "banned": False, "records": 2}
        assert client.get("/v1/bans/early").status_code == 404
