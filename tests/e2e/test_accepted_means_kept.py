"""Accepted means kept (rule 8 of docs/architecture.md-3.10), from outside, on both profiles: what capture accepts every
store holds, queryable exactly as sent; what it refuses leaves nothing behind; a reused
Idempotency-Key never rewrites a report; a session key is scoped by sku."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashes.model import MAX_ATTACHMENTS, MAX_INDEXED_CHARS
from local_runtime.process import Serve
from ports.limits import INT64_MAX, INT64_MIN

EXAMPLES = 120


def full_reports(client: httpx.Client, sku: str, expected: int, timeout_s: float = 60) -> list[dict[str, Any]]:
    """Every report of the sku once `expected` are visible (or the timeout passed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reports: list[dict[str, Any]] = []
        params: dict[str, Any] = {"sku": sku, "limit": 1000, "fields": "full"}
        while True:
            page = client.get("/v1/crashes", params=params).json()
            reports += page["reports"]
            if page["nextCursor"] is None:
                break
            params["cursor"] = page["nextCursor"]
        if len(reports) >= expected or time.monotonic() > deadline:
            return reports
        time.sleep(0.25)


def test_an_integer_error_code_beyond_64_bits_is_refused(serve: Serve):
    """Finding 1 of issue 15: 202, then MariaDB refused it and the partition stalled forever."""
    with httpx.Client(base_url=serve.url) as client:
        answer = client.post("/v1/crashes", json={"sku": "t:big", "errorCode": int("9" * 400)})
        assert answer.status_code == 400
        assert answer.json()["field"] == "errorCode"
        assert client.post("/v1/crashes", json={"sku": "t:big", "errorCode": INT64_MAX}).status_code == 202
        assert client.post("/v1/crashes", json={"sku": "t:big", "errorCode": INT64_MAX + 1}).status_code == 400
        [report] = full_reports(client, "t:big", 1)
        assert report["payload"]["errorCode"] == INT64_MAX


def test_a_report_holds_a_bounded_number_of_attachments(serve: Serve):
    """Finding 6 of issue 15: 98,000 tiny attachments in one report were 98,000 document writes."""
    many = {f"{n}.txt": "eA==" for n in range(MAX_ATTACHMENTS + 1)}
    with httpx.Client(base_url=serve.url) as client:
        answer = client.post("/v1/crashes", json={"sku": "t:many", "attachments": many})
        assert answer.status_code == 400
        assert answer.json()["field"] == "attachments"
        del many["0.txt"]
        assert client.post("/v1/crashes", json={"sku": "t:many", "attachments": many}).status_code == 202
        [report] = full_reports(client, "t:many", 1)
        assert report["payload"]["attachments"] == many


def test_a_reused_key_with_another_body_keeps_the_first_report(serve: Serve):
    """Finding 2 of issue 15: both got 202 and the document store then held the second body."""
    sku, key = f"t:reuse.{uuid.uuid4().hex[:8]}", "crash-1"
    first = {"sku": sku, "crashType": "FIRST", "attachments": {"a.txt": "Zmlyc3Q="}}
    with httpx.Client(base_url=serve.url) as client:
        receipt = client.post("/v1/crashes", json=first, headers={"Idempotency-Key": key})
        [report] = full_reports(client, sku, 1)
        again = client.post("/v1/crashes", json={**first, "crashType": "SECOND", "attachments": {"a.txt": "b3RoZXI="}},
                            headers={"Idempotency-Key": key})
        retry = client.post("/v1/crashes", json=first, headers={"Idempotency-Key": key})
        assert receipt.json() == retry.json()  # a true retry gets the same receipt
        assert again.status_code in (202, 409)
        # a report sent after both is visible: the reused key held nothing back
        client.post("/v1/crashes", json={"sku": sku, "crashType": "LATER"})
        reports = full_reports(client, sku, 2)
        assert [r["crashType"] for r in reports] == ["FIRST", "LATER"]
        assert reports[0]["payload"] == first
        assert client.get(f"/v1/crashes/{report['reportId']}/attachments/a.txt").content == b"first"


def test_a_session_key_is_scoped_by_sku(serve: Serve):
    """Finding 3 of issue 15: the same key for sessions of another sku answered 202 and counted 0."""
    skus = [f"t:s{n}.{uuid.uuid4().hex[:8]}" for n in range(2)]
    with httpx.Client(base_url=serve.url) as client:
        for sku, count in zip(skus, (2, 3), strict=True):
            answer = client.post("/v1/sessions", json=[{"sku": sku, "kind": "client"}] * count,
                                 headers={"Idempotency-Key": "same-key"})
            assert answer.json() == {"accepted": count}
        deadline = time.monotonic() + 30
        while True:
            counts = [sum(b["sessions"] for b in client.get("/v1/stats", params={"sku": sku}).json()["series"])
                      for sku in skus]
            if counts == [2, 3] or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert counts == [2, 3]


# text at and past each bound, with what stores find hard: NUL, emoji (4 bytes in utf8mb4), marks
_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(["\x00", "🔥", "é", "\u0301"])


def _text_around(bound: int) -> st.SearchStrategy[str]:
    return st.integers(max(0, bound - 2), bound + 1).flatmap(lambda n: st.text(_CHARS, min_size=n, max_size=n))


def _int_around(low: int, high: int) -> st.SearchStrategy[int]:
    return st.sampled_from([low - 1, low, high, high + 1]) | st.integers(low, high) | st.integers(-(10**30), 10**30)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_CHARS, max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(_CHARS, max_size=8), inner, max_size=4),
    max_leaves=12,
)

_NAMES = st.text(st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from("._-é🔥"), min_size=1,
                 max_size=130)


def _payloads(sku: str) -> st.SearchStrategy[dict[str, Any]]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "crashType": _text_around(MAX_INDEXED_CHARS),
        "platform": _text_around(MAX_INDEXED_CHARS),
        "buildVersion": _text_around(MAX_INDEXED_CHARS),
        "errorCode": _text_around(MAX_INDEXED_CHARS) | _int_around(INT64_MIN, INT64_MAX),
        "clientTime": _text_around(64) | _int_around(INT64_MIN, INT64_MAX),
        "playerId": _text_around(128),
        "sessionId": _text_around(128),
        "stackTrace": st.text(_CHARS, max_size=300),
        "attachments": st.integers(MAX_ATTACHMENTS - 1, MAX_ATTACHMENTS + 1).flatmap(
            lambda n: st.dictionaries(_NAMES, st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
                                      min_size=n, max_size=n)) | st.dictionaries(
            _NAMES, st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()), max_size=3),
        "extra": _JSON,
    }
    return st.fixed_dictionaries({"sku": st.just(sku)}, optional=optional)


def test_what_capture_accepts_is_queryable_exactly_as_sent_and_what_it_refuses_leaves_nothing(serve: Serve):
    sku = f"t:prop.{uuid.uuid4().hex[:8]}"
    accepted: dict[str, dict[str, Any]] = {}  # eventId → payload
    refused = 0
    with httpx.Client(base_url=serve.url, timeout=30) as client:

        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(_payloads(sku))
        def post(payload: dict[str, Any]) -> None:
            nonlocal refused
            answer = client.post("/v1/crashes", content=json.dumps(payload), headers={
                "content-type": "application/json", "Idempotency-Key": str(uuid.uuid4())})
            assert answer.status_code in (202, 400), answer.text
            if answer.status_code == 202:
                accepted[answer.json()["eventId"]] = payload
            else:
                refused += 1
                assert answer.json()["error"] in ("invalid_field", "missing_field")

        post()
        reports = full_reports(client, sku, len(accepted))
    visible = {r["eventId"]: r for r in reports}
    never_visible = set(accepted) - set(visible)
    print(f"\n{serve.profile}: {len(accepted) + refused} payloads tried, {len(accepted)} accepted, "
          f"{refused} refused, {len(never_visible)} accepted but never visible")
    assert not never_visible
    assert len(reports) == len(visible) == len(accepted)  # once each, and nothing refused was stored
    for event_id, report in visible.items():
        assert report["payload"] == accepted[event_id]
    assert accepted and refused  # the bounds were reached from both sides
