"""Crash groups as issues through `blackbox serve` on both profiles: a group resolved in build 2 that
crashes again in build 1 stays resolved, in build 3 regresses, and a receiver started here gets
exactly one signed webhook for it; the crash consumer handed every record again (its group sent
back to the first offset) sends no second one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Receiver, eventually, redeliver, running, verified

SKU = "issues:pc"
GROUP = "blackbox-crash-consumer"
SECRET = "a-secret-of-the-studio"
TRACE = "#0 0x7ff6a1b2c3d4 in Renderer::DrawMesh() at renderer.cpp:412\n#1 0x7ff6a1b2a000 in main"


@pytest.mark.parametrize("profile", ["embedded", "services"])
def test_a_resolved_group_regresses_once_and_its_webhook_is_signed_and_sent_once(
        profile: str, tmp_path: Path, receiver: Receiver) -> None:
    env = {"BLACKBOX_WEBHOOKS__ALLOW_PRIVATE": "true"}
    with running(profile, tmp_path, env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for name, kinds in (("ops", ["regressed"]), ("all", ["new-group", "regressed"])):
            put = client.put(f"/v1/webhooks/{name}", json={"url": f"{receiver.url}/{name}", "secret": SECRET,
                                                            "alerts": kinds})
            assert put.status_code == 201, put.text
            assert "secret" not in put.json()

        def crash(build: str, trace: str = TRACE, player: str | None = None) -> None:
            report = {"sku": SKU, "buildVersion": build, "stackTrace": trace, "playerId": player}
            sent = client.post("/v1/crashes", json={k: v for k, v in report.items() if v is not None})
            assert sent.status_code == 202

        crash("1", player="p-1")
        reports = eventually(lambda: client.get("/v1/crashes", params={"sku": SKU}).json()["reports"], bool)
        signature = reports[0]["signature"]
        page = eventually(lambda: client.get(f"/v1/crash-groups/{signature}", params={"sku": SKU}),
                          lambda r: r.status_code == 200)
        assert page.json()["state"] == "unresolved" and page.json()["firstBuild"] == "1"
        resolved = client.put(f"/v1/crash-groups/{signature}/state", params={"sku": SKU},
                              json={"state": "resolved", "inBuild": "2"})
        assert resolved.status_code == 200, resolved.text
        assert (resolved.json()["state"], resolved.json()["inBuild"]) == ("resolved", "2")
        crash("1", player="p-2")  # an older build: not a regression

        def group() -> dict[str, Any]:
            found: dict[str, Any] = client.get(f"/v1/crash-groups/{signature}", params={"sku": SKU}).json()
            return found

        assert eventually(group, lambda g: g["reports"] == 2)["state"] == "resolved"
        crash("3", player="p-1")
        regressed = eventually(group, lambda g: g["state"] == "regressed")
        assert (regressed["state"], regressed["regressions"], regressed["reports"]) == ("regressed", 1, 3)
        # players affected: distinct playerIds, in all and by build
        assert regressed["players"] == 2
        assert [(b["build"], b["players"]) for b in regressed["builds"]] == [("3", 1), ("1", 2)]
        assert [h["state"] for h in regressed["history"]] == ["regressed", "resolved", "unresolved"]
        ops = eventually(lambda: receiver.at("/ops"), bool)
        assert len(ops) == 1
        headers, body = ops[0]
        assert body["kind"] == "regressed" and signature in body["text"] and body["alert"]["build"] == "3"
        raw = next(b for p, _, b in receiver.got if p == "/ops")
        assert verified(headers, raw, SECRET) and not verified(headers, raw + b" ", SECRET)
        assert eventually(lambda: [b["kind"] for _, b in receiver.at("/all")], lambda k: len(k) == 2) == [
            "new-group", "regressed"]

        # every crash record again: no second alert, no second delivery
        assert server.stop() == 0
        redeliver(server, GROUP, "crashes")
        server.start()
        marker = "#0 0x1 in Marker::Crash() at marker.cpp:1"
        for _ in range(8):
            crash("9", marker)
        assert eventually(lambda: len(receiver.at("/all")), lambda n: n == 3) == 3
        time.sleep(2)  # a second delivery would be on its way by now (serve sends every second)
        assert [b["kind"] for _, b in receiver.at("/all")] == ["new-group", "regressed", "new-group"]
        assert len(receiver.at("/ops")) == 1
        log = client.get("/v1/webhooks/ops/deliveries").json()
        assert [(d["kind"], d["status"], d["attempts"], d["lastStatusCode"]) for d in log["deliveries"]] == [
            ("regressed", "delivered", 1, 204)]
        assert eventually(group, lambda g: g["reports"] == 3)["regressions"] == 1
