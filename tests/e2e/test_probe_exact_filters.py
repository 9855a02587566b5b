"""A report filter matches exactly that value on every profile. MySQL's utf8mb4_bin pads with
spaces when it compares, so `platform=pc ` once matched the reports of platform `pc` there (and a
crash group of them) while SQLite matched none: a trailing space a client sent is kept, and is
part of the value."""

from __future__ import annotations

import uuid

import httpx

from local_runtime.process import Serve
from tests.e2e.test_strict_queries import eventually


def test_a_filter_with_a_trailing_space_matches_only_that_value(serve: Serve) -> None:
    sku = f"exact-{uuid.uuid4().hex[:8]}:pc"
    trace = "#0 0x1 in Render::Draw()\n#1 0x2 in main"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for platform in ("pc", "pc", "pc "):
            report = {"sku": sku, "platform": platform, "crashType": "AV", "stackTrace": trace}
            assert client.post("/v1/crashes", json=report).status_code == 202

        def platforms(**filters: str) -> list[str]:
            response = client.get("/v1/crashes", params={"sku": sku, **filters})
            assert response.status_code == 200, response.text
            return [r["platform"] for r in response.json()["reports"]]

        def group_counts(**filters: str) -> list[int]:
            response = client.get("/v1/crash-groups", params={"sku": sku, **filters})
            assert response.status_code == 200, response.text
            return [g["count"] for g in response.json()["groups"]]

        assert len(eventually(platforms, lambda found: len(found) == 3)) == 3
        assert platforms(platform="pc ") == ["pc "]
        assert platforms(platform="pc") == ["pc", "pc"]
        assert platforms(platform="pc  ") == []
        assert platforms(crashType="AV ") == []
        assert group_counts(platform="pc ") == [1]
        assert group_counts(platform="pc") == [2]
        assert group_counts(crashType="AV ") == []
