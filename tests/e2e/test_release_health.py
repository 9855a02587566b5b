"""Release health through `blackbox serve` on both profiles: two builds with known sessions (ok and
crashed, with players) and crashes give exact crash-free figures, the newer build is told against
the older, and a batch the session counter is handed again (its consumer group sent back to the
first offset) changes no count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import eventually, redeliver, running

SKU = "release:pc"
GROUP = "blackbox-session-counter"


def health(client: httpx.Client, build: str) -> dict[str, Any]:
    response = client.get(f"/v1/releases/{build}", params={"sku": SKU})
    return response.json() if response.status_code == 200 else {}


def counts(figures: dict[str, Any]) -> tuple[Any, ...]:
    """A build's counts (its shares of the sku move with other builds' sessions)."""
    return tuple(figures[k] for k in ("build", "firstSeen", "sessions", "outcomes", "players", "crashedPlayers",
                                      "crashes"))


@pytest.mark.parametrize("profile", ["embedded", "services"])
def test_two_builds_give_exact_crash_free_figures_and_a_redelivered_batch_changes_none(
        profile: str, tmp_path: Path) -> None:
    with running(profile, tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        old = [{"sku": SKU, "kind": "client", "buildVersion": "1.0", "playerId": f"p{i}",
                "status": "crashed" if i < 2 else "ok"} for i in range(8)]
        old += [{"sku": SKU, "kind": "client", "buildVersion": "1.0", "playerId": "p0", "status": "ok"},
                {"sku": SKU, "kind": "client", "buildVersion": "1.0"}]  # a session of no player: ok
        assert client.post("/v1/sessions", json=old).status_code == 202
        for _ in range(3):
            assert client.post("/v1/crashes", json={"sku": SKU, "buildVersion": "1.0"}).status_code == 202
        assert eventually(lambda: health(client, "1.0").get("sessions"), lambda n: n == 10) == 10
        new = [{"sku": SKU, "kind": "client", "buildVersion": "1.1", "playerId": f"q{i % 4}", "status": "ok"}
               for i in range(5)]
        # sessions of no build count for the sku (adoption's whole) and no build
        unbuilt = [{"sku": SKU, "kind": "server"} for _ in range(5)]
        assert client.post("/v1/sessions", json=new + unbuilt, headers={"Idempotency-Key": "new-build"}) \
            .status_code == 202
        assert client.post("/v1/crashes", json={"sku": SKU, "buildVersion": "1.1"}).status_code == 202
        # a client's retry is the same batch, never a second one
        assert client.post("/v1/sessions", json=new + unbuilt, headers={"Idempotency-Key": "new-build"}) \
            .status_code == 202

        def settled() -> dict[str, Any]:
            found: dict[str, Any] = eventually(lambda: health(client, "1.1"),
                              lambda h: h.get("sessions") == 5 and h.get("crashes") == 1 and h["previous"]
                              and h["previous"]["crashes"] == 3 and h["adoption"] == 0.25)
            return found

        got = settled()
        assert got["build"] == "1.1" and got["outcomes"] == {"ok": 5, "crashed": 0, "abnormal": 0, "errored": 0}
        assert (got["players"], got["crashedPlayers"], got["crashFreePlayers"]) == (4, 0, 1.0)
        assert (got["crashFreeSessions"], got["crashes"], got["crashRate"]) == (1.0, 1, 0.2)
        before = got["previous"]
        assert before["build"] == "1.0" and before["sessions"] == 10 and before["adoption"] == 0.5
        assert before["outcomes"] == {"ok": 8, "crashed": 2, "abnormal": 0, "errored": 0}
        assert (before["players"], before["crashedPlayers"], before["crashFreePlayers"]) == (8, 2, 0.75)
        assert (before["crashFreeSessions"], before["crashes"], before["crashRate"]) == (0.8, 3, 0.3)
        assert got["change"] == pytest.approx({"adoption": -0.25, "crashFreeSessions": 0.2, "crashFreePlayers": 0.25,
                                               "crashRate": -0.1})
        assert sum(b["sessions"] for b in got["series"]) == 5 and got["interval"] == "day"
        assert health(client, "1.0")["previous"] is None
        first = client.get("/v1/releases", params={"sku": SKU, "limit": 1}).json()
        rest = client.get("/v1/releases", params={"sku": SKU, "limit": 1, "cursor": first["nextCursor"]}).json()
        assert [b["build"] for b in first["builds"] + rest["builds"]] == ["1.1", "1.0"]
        assert rest["nextCursor"] is None
        hourly = client.get("/v1/releases/1.0", params={"sku": SKU, "interval": "hour"}).json()
        assert len(hourly["series"]) == 7 * 24 and sum(b["crashedSessions"] for b in hourly["series"]) == 2

        assert server.stop() == 0
        redeliver(server, GROUP, "sessions")
        server.start()
        # sessions after the redelivered ones in every partition: once all are counted, so are those
        # of a build after 1.1's in build order: one first seen in 1.1's minute but before it in that order
        # (a word sorts before a number) is 1.1's previous build, when the run crosses a minute after 1.0
        markers, marker = 40, "9.0-marker"
        for i in range(markers):
            assert client.post("/v1/sessions", json={"sku": SKU, "kind": "client", "buildVersion": marker,
                                                     "playerId": f"m{i}"}).status_code == 202
        assert eventually(lambda: health(client, marker).get("sessions"), lambda n: n == markers) == markers
        again = health(client, "1.1")
        assert counts(again) == counts(got) and counts(again["previous"]) == counts(got["previous"])
        stats = client.get("/v1/stats", params={"sku": SKU, "granularity": "hour"}).json()
        assert sum(b["sessions"] for b in stats["series"]) == 10 + 10 + markers
