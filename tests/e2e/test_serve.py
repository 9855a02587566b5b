"""The crash path end to end through `blackbox serve`: every report found exactly once, payloads
and attachments exactly as sent, stats that match, and nothing lost across a restart (bad input:
test_bad_input.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import signal
import string
import time
from collections import Counter
from typing import Any

import httpx

from local_runtime.process import Serve

SKUS = ["skyrift:pc", "skyrift:ps5", "kart.racer-2"]
REPORTS = 1000
SESSIONS = 5000
CONCURRENCY = 16


def crash_report(rng: random.Random, n: int) -> dict[str, Any]:
    """Bimodal sizes like the paper's (0.3 to 5 KB small, 10 to 512 KB large), some with attachments."""
    large = n % 5 == 0
    size = rng.randint(10_240, 512 * 1024) if large else rng.randint(300, 5120)
    size = {0: 512 * 1024, 1: 300}.get(n, size)
    report: dict[str, Any] = {
        "sku": SKUS[n % len(SKUS)],
        "crashType": rng.choice(["ACCESS_VIOLATION", "OUT_OF_MEMORY", "GPU_HANG"]),
        "errorCode": rng.choice([3221225477, "E_FAIL"]),
        "platform": rng.choice(["windows-x64", "ps5"]),
        "buildVersion": f"1.4.{n % 7}",
        "playerId": f"p-{n}",
        "stackTrace": f"#0 0x{rng.getrandbits(48):x} in Renderer::Draw{n % 4}() at r.cpp:{rng.randint(1, 999)}",
        "n": n,
    }
    if n % 3 == 0:
        blob = rng.randbytes(max(0, size // 2 - 400))
        report["attachments"] = {"minidump.dmp": base64.b64encode(blob).decode(),
                                 "screen shot.png": base64.b64encode(b"\x89PNG" + rng.randbytes(64)).decode()}
    padding = size - len(json.dumps(report))
    if padding > 0:
        report["log"] = "".join(rng.choices(string.ascii_letters, k=padding))
    return report


async def post_all(base_url: str, requests: list[tuple[str, Any]]) -> list[httpx.Response]:
    limit = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        async def one(path: str, body: Any) -> httpx.Response:
            async with limit:
                return await client.post(path, content=encode(body), headers={"content-type": "application/json"})

        return await asyncio.gather(*(one(path, body) for path, body in requests))


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()


def list_all(client: httpx.Client, sku: str, fields: str = "summary") -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    params: dict[str, Any] = {"sku": sku, "limit": 100, "fields": fields}
    while True:
        page = client.get("/v1/crashes", params=params)
        assert page.status_code == 200, page.text
        reports += page.json()["reports"]
        if page.json()["nextCursor"] is None:
            return reports
        params["cursor"] = page.json()["nextCursor"]


def wait_for(client: httpx.Client, expected: dict[str, int], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(len(list_all(client, sku)) >= n for sku, n in expected.items()):
            return
        time.sleep(0.5)
    raise AssertionError("reports did not all become visible")


def session_total(client: httpx.Client, sku: str) -> tuple[int, int]:
    series = client.get("/v1/stats", params={"sku": sku, "granularity": "hour"}).json()["series"]
    return sum(b["sessions"] for b in series), sum(b["crashes"] for b in series)


def test_every_report_found_exactly_once_with_payload_attachments_and_stats(serve: Serve):
    rng = random.Random(7)
    reports = [crash_report(rng, n) for n in range(REPORTS)]
    singles = [("/v1/sessions", {"sku": SKUS[i % 3], "kind": "client"}) for i in range(1000)]
    batches = [("/v1/sessions", [{"sku": SKUS[(b + i) % 3], "kind": rng.choice(["client", "server"])}
                                 for i in range(100)]) for b in range(40)]
    requests = [("/v1/crashes", r) for r in reports] + singles + batches
    rng.shuffle(requests)
    responses = asyncio.run(post_all(serve.url, requests))

    assert Counter(r.status_code for r in responses) == {202: len(requests)}
    event_ids = {}
    for (path, body), response in zip(requests, responses, strict=True):
        if path == "/v1/crashes":
            event_ids[response.json()["eventId"]] = body
    assert len(event_ids) == REPORTS
    sizes = [len(encode(r)) for r in reports]
    assert min(sizes) <= 400 and max(sizes) >= 500 * 1024
    assert sum(r.json().get("accepted", 0) for r in responses) == SESSIONS

    per_sku = Counter(r["sku"] for r in reports)
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        wait_for(client, per_sku)
        found: list[dict[str, Any]] = []
        for sku in SKUS:
            found += list_all(client, sku, fields="full")
        assert Counter(r["eventId"] for r in found) == Counter({e: 1 for e in event_ids})
        for report in found:
            assert report["payload"] == event_ids[report["eventId"]]
            assert report["sizeBytes"] == len(encode(event_ids[report["eventId"]]))
        with_attachments = [r for r in found if r["attachments"]]
        assert len(with_attachments) == len([r for r in reports if "attachments" in r])
        for report in with_attachments:
            for name, data in event_ids[report["eventId"]]["attachments"].items():
                got = client.get(f"/v1/crashes/{report['reportId']}/attachments/{name}")
                assert got.status_code == 200 and got.content == base64.b64decode(data)

        expected_sessions = Counter()
        for path, body in requests:
            if path == "/v1/sessions":
                expected_sessions.update(s["sku"] for s in (body if isinstance(body, list) else [body]))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            session_total(client, sku) != (expected_sessions[sku], per_sku[sku]) for sku in SKUS
        ):
            time.sleep(0.5)
        for sku in SKUS:
            assert session_total(client, sku) == (expected_sessions[sku], per_sku[sku])


def test_restart_on_the_same_data_directory_loses_nothing(serve: Serve):
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        before = {sku: {r["eventId"] for r in list_all(client, sku)} for sku in SKUS}
        sessions_before = {sku: session_total(client, sku) for sku in SKUS}
    # posted just before the stop: some are still unconsumed when the server goes down
    burst = [("/v1/crashes", {"sku": SKUS[0], "burst": i}) for i in range(200)]
    burst += [("/v1/sessions", {"sku": SKUS[0], "kind": "server"}) for _ in range(100)]
    responses = asyncio.run(post_all(serve.url, burst))
    assert {r.status_code for r in responses} == {202}
    assert serve.stop(signal.SIGTERM) == 0
    serve.start()
    new_ids = {r.json()["eventId"] for r in responses if "eventId" in r.json()}
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        wait_for(client, {SKUS[0]: len(before[SKUS[0]]) + 200})
        after = {sku: Counter(r["eventId"] for r in list_all(client, sku)) for sku in SKUS}
        assert after[SKUS[0]] == Counter(before[SKUS[0]] | new_ids)
        assert all(after[sku] == Counter(before[sku]) for sku in SKUS[1:])
        deadline = time.monotonic() + 30
        expected = (sessions_before[SKUS[0]][0] + 100, sessions_before[SKUS[0]][1] + 200)
        while time.monotonic() < deadline and session_total(client, SKUS[0]) != expected:
            time.sleep(0.2)
        assert session_total(client, SKUS[0]) == expected
