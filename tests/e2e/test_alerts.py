"""Velocity and crash-free drop alerts through `blackbox serve` on both profiles: build 1.1's
crash-free sessions fall well below 1.0's and one of its groups crashes in a large share of its
sessions; a receiver started here gets exactly one signed webhook of each kind, naming the build
(and the group), and the runs of the alerts' job after that send nothing more. The sku's alert
history lists them, open, with their delivery, besides the new group's (which no webhook took)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Receiver, eventually, running, verified

SKU = "alerts:pc"
SECRET = "the-studio-s-alerts-secret"
TRACE = "#0 0x7ff6a1b2c3d4 in Physics::Step() at physics.cpp:88\n#1 0x7ff6a1b2a000 in main"
POLICY = {"BLACKBOX_ALERTS__VELOCITY_RATE": "0.2", "BLACKBOX_ALERTS__VELOCITY_MIN_EVENTS": "3",
          "BLACKBOX_ALERTS__CRASH_FREE_MARGIN": "0.2", "BLACKBOX_ALERTS__CRASH_FREE_MIN_SESSIONS": "5",
          "BLACKBOX_ALERTS__LOOK_EVERY_S": "1"}


def sessions(build: str, crashed: int, ok: int) -> list[dict[str, str]]:
    return [{"sku": SKU, "kind": "client", "buildVersion": build, "status": "crashed" if i < crashed else "ok"}
            for i in range(crashed + ok)]


@pytest.mark.parametrize("profile", ["embedded", "services"])
def test_a_velocity_and_a_crash_free_drop_are_each_told_once(profile: str, tmp_path: Path,
                                                              receiver: Receiver) -> None:
    env = {"BLACKBOX_WEBHOOKS__ALLOW_PRIVATE": "true", **POLICY}
    with running(profile, tmp_path, env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.put("/v1/webhooks/ops", json={"url": f"{receiver.url}/ops", "secret": SECRET,
                                                     "alerts": ["velocity", "crash-free-drop"]}).status_code == 201

        def counted(build: str) -> int:
            answer = client.get(f"/v1/releases/{build}", params={"sku": SKU})
            return int(answer.json()["sessions"]) if answer.status_code == 200 else 0

        # 1.0 first (the previous build), all crash-free; then 1.1, 8 of 10 crashed: any part of it
        # the job may see first is a drop too, so the condition never goes back to false
        assert client.post("/v1/sessions", json=sessions("1.0", 0, 10)).status_code == 202
        assert eventually(lambda: counted("1.0"), lambda n: n == 10) == 10
        assert client.post("/v1/sessions", json=sessions("1.1", 8, 2)).status_code == 202
        assert eventually(lambda: counted("1.1"), lambda n: n == 10) == 10
        # 4 reports of one group on 1.1's 10 sessions: 40% ≥ 20%, with at least 3
        for _ in range(4):
            assert client.post("/v1/crashes", json={"sku": SKU, "buildVersion": "1.1", "stackTrace": TRACE}
                               ).status_code == 202
        got = eventually(lambda: receiver.at("/ops"), lambda g: {b["kind"] for _, b in g} == {
            "velocity", "crash-free-drop"}, seconds=60)
        # the job runs again (twice), its conditions still true, and the sender once more: nothing more is sent
        time.sleep(3)
        assert len(receiver.at("/ops")) == 2
        by_kind: dict[str, dict[str, Any]] = {body["kind"]: body for _, body in got}
        raw = [(headers, body) for path, headers, body in receiver.got if path == "/ops"]
        assert all(verified(headers, body, SECRET) for headers, body in raw)

        drop = by_kind["crash-free-drop"]["alert"]
        assert (drop["sku"], drop["build"], drop["previousBuild"]) == (SKU, "1.1", "1.0")
        assert (drop["crashFreeSessions"], drop["previousCrashFreeSessions"], drop["margin"]) == (
            pytest.approx(0.2), 1.0, 0.2)
        assert "1.1" in by_kind["crash-free-drop"]["text"]

        velocity = by_kind["velocity"]["alert"]
        reports = client.get("/v1/crashes", params={"sku": SKU}).json()["reports"]
        assert (velocity["sku"], velocity["build"], velocity["signature"]) == (SKU, "1.1", reports[0]["signature"])
        # the job may have run once 3 of the 4 were indexed: 30% is over the threshold too
        assert velocity["events"] in (3, 4) and (velocity["sessions"], velocity["threshold"]) == (10, 0.2)
        assert velocity["signature"] in by_kind["velocity"]["text"]

        def history() -> list[dict[str, Any]]:
            answer = client.get("/v1/alerts/history", params={"sku": SKU})
            assert answer.status_code == 200, answer.text
            return list(answer.json()["alerts"])

        lines = eventually(history, lambda h: all(d["status"] == "delivered" for a in h for d in a["deliveries"])
                           and len(h) == 3)
        assert [a["openedAt"] for a in lines] == sorted((a["openedAt"] for a in lines), reverse=True)
        listed = {a["kind"]: a for a in lines}
        assert listed.keys() == {"new-group", "velocity", "crash-free-drop"}
        assert (listed["new-group"]["signature"], listed["new-group"]["deliveries"]) == (velocity["signature"], [])
        assert (listed["velocity"]["signature"], listed["velocity"]["build"]) == (velocity["signature"], "1.1")
        assert (listed["crash-free-drop"]["signature"], listed["crash-free-drop"]["build"]) == (None, "1.1")
        for kind in ("velocity", "crash-free-drop"):
            line = listed[kind]
            assert (line["closedAt"], line["alert"], line["text"]) == (None, by_kind[kind]["alert"],
                                                                       by_kind[kind]["text"])
            assert [(d["webhook"], d["status"], d["lastStatusCode"]) for d in line["deliveries"]] == [
                ("ops", "delivered", 204)]
        page = client.get("/v1/alerts/history", params={"sku": SKU, "limit": 2}).json()
        rest = client.get("/v1/alerts/history", params={"sku": SKU, "cursor": page["nextCursor"]}).json()
        assert page["alerts"] + rest["alerts"] == lines and rest["nextCursor"] is None
