"""Queries through `blackbox serve` on both profiles: an unknown query parameter is refused on every
GET route, crash groups and reports filter as documented, reports page newest first without a skip
or a repeat while more arrive, a number posted stays a number, and the skus and boards a
dashboard picks from are listed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx

from lambdas.functions import API_ROUTES
from local_runtime.process import Serve
from tests.e2e.conftest import eventually


def every_page(client: httpx.Client, path: str, key: str, params: dict[str, Any],
               between: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """All items of a listing, following nextCursor, calling `between` before each next page."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        response = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        items += response.json()[key]
        cursor = response.json()["nextCursor"]
        if cursor is None:
            return items
        between()


def test_an_unknown_or_repeated_query_parameter_is_refused_on_every_get_route(serve: Serve):
    paths = [path.format(reportId="1", name="a.txt", board="b", playerId="p", projectId="7", build="1.0",
                         signature="0" * 16)
             for method, path in ((r.method, r.path) for r in API_ROUTES) if method == "GET"]
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for path in paths:
            # `Sku` sorts before `sku`: named first wherever sku is unknown too
            cases = [("sort=desc", "sort"), ("sku=g&Sku=g", "Sku")]
            if path == "/v1/crashes":
                cases.append(("sku=g&limit=5&limit=6", "limit"))
            for query, field in cases:
                answer = client.get(f"{path}?{query}")
                assert answer.status_code == 400, (path, query, answer.text)
                assert answer.json()["error"] == "invalid_field" and answer.json()["field"] == field, answer.text


def test_crash_groups_and_reports_filter_by_platform_build_and_type(serve: Serve):
    sku = f"filters-{uuid.uuid4().hex[:8]}:multi"
    trace = "#0 0x1 in Render::Draw()\n#1 0x2 in main"
    sent = [("ps5", "1.0", "AV")] * 3 + [("pc", "1.0", "AV")] * 2 + [("pc", "1.1", "OOM")]
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for platform, build, kind in sent:
            report = {"sku": sku, "platform": platform, "buildVersion": build, "crashType": kind, "stackTrace": trace}
            assert client.post("/v1/crashes", json=report).status_code == 202

        def groups(**filters: str) -> list[int]:
            response = client.get("/v1/crash-groups", params={"sku": sku, **filters})
            assert response.status_code == 200, response.text
            return [g["count"] for g in response.json()["groups"]]

        assert eventually(groups, lambda counts: counts == [6]) == [6]
        assert groups(platform="ps5") == [3]
        assert groups(platform="pc", buildVersion="1.0") == [2]
        assert groups(crashType="OOM") == [1]
        assert groups(platform="switch") == []
        reports = client.get("/v1/crashes", params={"sku": sku, "platform": "pc", "crashType": "AV"}).json()["reports"]
        assert [(r["platform"], r["crashType"]) for r in reports] == [("pc", "AV")] * 2


def test_reports_newest_first_page_without_skip_or_repeat_while_more_arrive(serve: Serve):
    sku = f"order-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for n in range(12):
            assert client.post("/v1/crashes", json={"sku": sku, "n": n}).status_code == 202
        oldest_first = eventually(lambda: client.get("/v1/crashes", params={"sku": sku}).json()["reports"],
                                  lambda reports: len(reports) == 12)
        arriving = iter(range(12, 100))

        def post_more() -> None:
            assert client.post("/v1/crashes", json={"sku": sku, "n": next(arriving)}).status_code == 202

        newest_first = every_page(client, "/v1/crashes", "reports", {"sku": sku, "order": "desc", "limit": 5},
                                  between=post_more)
        # the reports there when paging began, newest first, each once: later ones are newer
        assert [r["reportId"] for r in newest_first] == [r["reportId"] for r in reversed(oldest_first)]
        everything = eventually(lambda: every_page(client, "/v1/crashes", "reports", {"sku": sku, "limit": 4}),
                                lambda reports: len(reports) == 14)
        ids = [r["reportId"] for r in everything]
        assert len(ids) == 14 and ids == sorted(set(ids))
        refused = client.get("/v1/crashes", params={"sku": sku, "sort": "desc"})
        assert (refused.status_code, refused.json()["field"]) == (400, "sort")


def test_an_error_code_posted_as_a_number_comes_back_as_that_number(serve: Serve):
    sku = f"numbers-{uuid.uuid4().hex[:8]}"
    report = {"sku": sku, "errorCode": 3221225477, "clientTime": 1_700_000_000_000, "extra": {"n": -7, "x": 1.5}}
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.post("/v1/crashes", json=report).status_code == 202
        full = {"sku": sku, "fields": "full"}
        [stored] = eventually(lambda: client.get("/v1/crashes", params=full).json()["reports"],
                              lambda reports: len(reports) == 1)
        assert stored["payload"] == report and isinstance(stored["payload"]["errorCode"], int)
        assert stored["errorCode"] == "3221225477"  # the summary's indexed text, as the contract says
        assert client.get(f"/v1/crashes/{stored['reportId']}").json()["payload"]["errorCode"] == 3221225477
        assert len(client.get("/v1/crashes", params={"sku": sku, "errorCode": "3221225477"}).json()["reports"]) == 1


def test_skus_and_boards_list_what_was_posted(serve: Serve):
    tag = uuid.uuid4().hex[:8]
    crashed, counted = f"picker-{tag}:crashes", f"picker-{tag}:sessions"
    board = f"picker-{tag}"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.post("/v1/crashes", json={"sku": crashed}).status_code == 202
        assert client.post("/v1/sessions", json=[{"sku": counted, "kind": "client"}]).status_code == 202
        assert client.post("/v1/scores", json={"board": f"{board}:auto", "playerId": "p", "score": 3}).status_code \
            == 202
        assert client.put(f"/v1/leaderboards/{board}:set", json={"order": "asc", "operator": "set"}).status_code == 201

        def ours(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
            return {item[key]: item for item in items if item[key].startswith(f"picker-{tag}")}

        skus = eventually(lambda: ours(every_page(client, "/v1/skus", "skus", {"limit": 2}), "sku"),
                          lambda found: len(found) == 2)
        assert skus[crashed]["lastCrash"] is not None and skus[crashed]["lastSession"] is None
        assert skus[counted]["lastSession"] is not None and skus[counted]["lastCrash"] is None
        boards = eventually(lambda: ours(every_page(client, "/v1/leaderboards", "boards", {"limit": 1}), "board"),
                            lambda found: len(found) == 2)
        plain = {"keepSeasons": None, "startsAt": None, "endsAt": None, "maxAttempts": None, "maxPlayers": None}
        assert boards == {f"{board}:auto": {"board": f"{board}:auto", "order": "desc", "operator": "best",
                                            "reset": "never", "ties": "shared", **plain},
                          f"{board}:set": {"board": f"{board}:set", "order": "asc", "operator": "set",
                                           "reset": "never", "ties": "shared", **plain}}
        everything = every_page(client, "/v1/skus", "skus", {"limit": 1000})
        assert [s["sku"] for s in everything] == sorted({s["sku"] for s in everything})
