"""Crash grouping through `blackbox serve` on both profiles: a sku's rules join two groups that
differ only in their allocator frame once past reports are reprocessed, and group new reports the
same; a group merged into another is counted there, past reports and new, keeps its own state, and
cannot be merged back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from crashes.grouping import GROUPING_TTL_MS
from tests.e2e.conftest import eventually, running

SKU = "grouping:pc"
TEXTURE = "#1 0x7ff6a1b2a000 in Texture::Load(char const*) at texture.cpp:88\n#2 0x7ff6a1b01234 in main"
SHADER = "#0 0x7ff6a1b2c3d4 in Shader::Compile() at shader.cpp:12\n#1 0x7ff6a1b01234 in main"


@pytest.mark.parametrize("profile", ["embedded", "services"])
def test_rules_and_merges_group_past_and_new_reports(profile: str, tmp_path: Path) -> None:
    with running(profile, tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        params = {"sku": SKU}

        def crash(trace: str) -> None:
            assert client.post("/v1/crashes", json={"sku": SKU, "buildVersion": "1", "stackTrace": trace}
                               ).status_code == 202

        def reports(count: int) -> dict[str, str]:
            """stackTrace's first line → signature, once `count` reports are listed."""
            found = eventually(lambda: client.get("/v1/crashes", params={**params, "fields": "full"}).json()["reports"],
                               lambda r: len(r) == count)
            assert len(found) == count
            return {r["payload"]["stackTrace"].split("\n")[0]: r["signature"] for r in found}

        def groups(done: Any) -> list[tuple[str, int]]:
            listed = eventually(lambda: [(g["signature"], g["count"]) for g in client.get(
                "/v1/crash-groups", params=params).json()["groups"]], done)
            return listed

        malloc, je_malloc = "#0 0x7ff6a1b2c3d4 in malloc", "#0 0x7ff6a1b2c3d4 in je_malloc"
        crash(f"{malloc}\n{TEXTURE}")
        crash(f"{je_malloc}\n{TEXTURE}")
        first = reports(2)
        assert first[malloc] != first[je_malloc]
        assert client.get("/v1/crash-groups:rules", params=params).json() == {
            "sku": SKU, "skip": [], "join": [], "version": 0, "updatedAt": None, "updatedBy": None}

        rules = client.put("/v1/crash-groups:rules", params=params, json={"skip": ["in *malloc"]})
        assert rules.status_code == 200, rules.text
        assert (rules.json()["version"], rules.json()["skip"], rules.json()["updatedBy"]) == (1, ["in *malloc"],
                                                                                            "server")
        assert client.get("/v1/crash-groups:rules", params=params).json() == rules.json()
        asked = client.post("/v1/crash-groups:reprocess", params=params)
        assert (asked.status_code, asked.json()) == (202, {"sku": SKU, "version": 1})
        [(texture, count)] = groups(lambda g: len(g) == 1)
        assert count == 2 and texture not in first.values()
        # the group the reprocessing made has its issue, seen since its first report
        page = client.get(f"/v1/crash-groups/{texture}", params=params).json()
        assert (page["state"], page["reports"], page["mergedInto"]) == ("unresolved", 2, None)
        time.sleep(GROUPING_TTL_MS / 1000)  # the consumer's rules are that old at most
        crash(f"#0 0x1 in tc_malloc\n{TEXTURE}")
        assert set(reports(3).values()) == {texture}

        crash(SHADER)
        shader = reports(4)[SHADER.split("\n", maxsplit=1)[0]]
        assert shader != texture
        assert client.put(f"/v1/crash-groups/{shader}/state", params=params,
                          json={"state": "ignored"}).status_code == 200
        merged = client.post(f"/v1/crash-groups/{shader}/merge", params=params, json={"into": texture})
        assert merged.status_code == 200, merged.text
        assert (merged.json()["mergedInto"], merged.json()["mergedBy"], merged.json()["state"]) == (
            texture, "server", "ignored")
        again = client.post(f"/v1/crash-groups/{shader}/merge", params=params, json={"into": texture})
        # the same merge (its reports may have moved since)
        assert (again.status_code, again.json()["mergedInto"], again.json()["mergedAt"]) == (
            200, texture, merged.json()["mergedAt"])
        back = client.post(f"/v1/crash-groups/{texture}/merge", params=params, json={"into": shader})
        assert (back.status_code, back.json()["error"]) == (409, "conflict")
        assert groups(lambda g: len(g) == 1) == [(texture, 4)]
        time.sleep(GROUPING_TTL_MS / 1000)
        crash(SHADER)
        assert set(reports(5).values()) == {texture}
        page = client.get(f"/v1/crash-groups/{texture}", params=params).json()
        assert (page["reports"], page["state"]) == (5, "unresolved")
        old = client.get(f"/v1/crash-groups/{shader}", params=params).json()
        assert (old["mergedInto"], old["state"], old["reports"]) == (texture, "ignored", 0)
        assert [h["state"] for h in old["history"]] == ["ignored", "unresolved"]
