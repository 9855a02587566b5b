"""A tournament end to end through `blackbox serve` on both profiles: a board with a window and
limits takes attempts until they are exhausted or its places taken, shows their scores in its top,
applies no plain /v1/scores update, and closes at its end."""

from __future__ import annotations

import time

import httpx

from local_runtime.process import Serve
from ports.timeutil import now_ms, to_rfc3339
from tests.e2e.conftest import eventually

# the tournament's window closes this long after it is set up
OPEN_S = 10


def test_a_tournament_takes_attempts_within_its_limits_and_window(serve: Serve):
    board = f"cup-{serve.profile}"
    end_ms = now_ms() + OPEN_S * 1000
    ends = to_rfc3339(end_ms)
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        settings = client.put(f"/v1/leaderboards/{board}", json={"maxAttempts": 3, "maxPlayers": 2, "endsAt": ends})
        assert settings.status_code == 201, settings.text
        described = client.get(f"/v1/leaderboards/{board}").json()
        assert (described["maxAttempts"], described["maxPlayers"], described["endsAt"]) == (3, 2, ends)
        assert described["nextReset"] == ends

        def attempt(player: str, score: int, key: str | None = None) -> httpx.Response:
            return client.post(f"/v1/leaderboards/{board}/attempts", json={"playerId": player, "score": score},
                               headers={"Idempotency-Key": key} if key else {})

        answers = [attempt("p1", 10, "p1-a"), attempt("p1", 10, "p1-a"), attempt("p1", 30), attempt("p1", 20)]
        assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
        assert [(a.json()["attempt"], a.json()["attemptsLeft"]) for a in answers] == [(1, 2), (1, 2), (2, 1), (3, 0)]
        assert answers[0].json() == {"board": board, "playerId": "p1", "season": None, "attempt": 1,
                                     "attemptsLeft": 2}
        exhausted = attempt("p1", 99)
        assert (exhausted.status_code, exhausted.json()["error"]) == (409, "attempts_exhausted")
        # plain updates to a tournament board are taken by capture, never applied: the attempt
        # after them on the board's partition shows when they were passed over
        plain = client.post("/v1/scores", json=[{"board": board, "playerId": "p1", "score": 9999},
                                                 {"board": board, "playerId": "p9", "score": 9999}])
        assert plain.status_code == 202
        assert attempt("p2", 15).status_code == 202
        full = attempt("p3", 50)
        assert (full.status_code, full.json()["error"]) == (409, "tournament_full")

        top = eventually(lambda: client.get(f"/v1/leaderboards/{board}/top").json()["entries"],
                         lambda entries: len(entries) == 2)
        assert [(e["playerId"], e["score"], e["rank"]) for e in top] == [("p1", 30, 1), ("p2", 15, 2)]

        plain_board = client.put("/v1/leaderboards/open-ladder", json={"order": "asc"})
        assert plain_board.status_code == 201
        refused = client.post("/v1/leaderboards/open-ladder/attempts", json={"playerId": "p1", "score": 1})
        assert (refused.status_code, refused.json()["error"]) == (409, "not_a_tournament")
        missing = client.post("/v1/leaderboards/no-such-cup/attempts", json={"playerId": "p1", "score": 1})
        assert (missing.status_code, missing.json()["error"]) == (404, "not_found")

        time.sleep(max(0, end_ms - now_ms()) / 1000)
        closed = attempt("p2", 50)
        assert (closed.status_code, closed.json()["error"]) == (409, "tournament_closed")
        assert attempt("p1", 10, "p1-a").json()["attempt"] == 1  # a retry still gets its answer
        assert client.get(f"/v1/leaderboards/{board}").json()["nextReset"] is None
