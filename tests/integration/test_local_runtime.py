"""The local gateway (HTTP ↔ API Gateway proxy events) and the poller (log ↔ MSK events)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
from typing import Any

import httpx
import pytest
from aws_lambda_powertools.event_handler import Response

from adapters.factory import Adapters
from api.requests import Posted
from api.resolver import create_resolver, json_response
from lambdas import capture
from local_runtime.context import LocalContext
from local_runtime.gateway import Gateway, QueueDelay, _check_loopback, proxy_event, route
from local_runtime.periodic import spill_replayer
from local_runtime.poller import Poller
from pipeline.msk import from_msk_event
from ports import OutgoingRecord
from ports.errors import Forbidden, StoreUnavailable
from ports.limits import MAX_BODY_BYTES


def test_routes_follow_the_rest_api_resources():
    def owner(method: str, path: str) -> tuple[str, str] | None:
        found = route(method, path)
        return None if found is None else (found.function, found.path)

    assert owner("POST", "/v1/crashes") == ("capture", "/v1/crashes")
    assert owner("POST", "/v1/sessions") == ("capture", "/v1/sessions")
    assert owner("GET", "/v1/crashes") == ("reporter", "/v1/crashes")
    assert owner("GET", "/v1/crashes/12/attachments/a.png") == ("reporter", "/v1/crashes/{reportId}/attachments/{name}")
    assert owner("GET", "/v1/crashes/12/attachments/a/b") is None
    assert owner("GET", "/v1/other") is None
    assert owner("POST", "/v1/crashesX") is None
    assert owner("DELETE", "/v1/crashes") is None
    assert owner("GET", "/v2/x") is None


def test_proxy_event_carries_query_headers_and_binary_bodies():
    scope = {"method": "POST", "path": "/v1/crashes", "query_string": b"a=1&a=2&b=", "client": ("10.0.0.1", 1),
             "headers": [(b"Content-Type", b"application/json"), (b"x-multi", b"1"), (b"x-multi", b"2")]}
    event = proxy_event(scope, b"\xff\x00")
    assert event["queryStringParameters"] == {"a": "2", "b": ""}
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert event["headers"]["content-type"] == "application/json"
    assert event["multiValueHeaders"]["x-multi"] == ["1", "2"]
    assert event["isBase64Encoded"] and base64.b64decode(event["body"]) == b"\xff\x00"
    assert proxy_event({**scope, "query_string": b""}, b"")["body"] is None


def test_a_query_that_is_not_utf8_is_400_and_a_replacement_character_sent_is_itself(adapters: Adapters):
    """Found from outside: `platform=%FF` was read as U+FFFD, so a filter said exact matched a
    report whose platform was that character, while an escaped surrogate matched nothing."""
    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=Gateway())
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return [await client.get(f"/v1/crashes?sku=s&platform={value}")
                    for value in ("%FF", "%ED%A0%80", "caf%C3", "%EF%BF%BD")]

    *refused, taken = asyncio.run(scenario())
    for answer in refused:
        assert answer.status_code == 400 and answer.json()["error"] == "bad_request"
        assert "UTF-8" in answer.json()["message"]
    assert taken.status_code == 200 and taken.json()["reports"] == []


def test_a_header_value_is_taken_without_the_whitespace_around_it():
    """RFC 9110 §5.5: whitespace around a field value is not part of it (httptools keeps what
    trails). A retry whose Idempotency-Key came with a trailing space is the same request."""
    scope = {"method": "POST", "path": "/v1/crashes", "query_string": b"",
             "headers": [(b"idempotency-key", b"retry-1 \t"), (b"x-multi", b"1 "), (b"x-multi", b"\t2")]}
    event = proxy_event(scope, b"{}")
    assert event["headers"]["idempotency-key"] == "retry-1"
    assert event["multiValueHeaders"]["x-multi"] == ["1", "2"]


def test_open_mode_reads_the_host_and_origin_without_the_whitespace_around_them():
    """As every other header (RFC 9110 §5.5): a loopback Host or Origin with a trailing space is
    still loopback, and a foreign one still foreign."""
    def scope(host: bytes, origin: bytes) -> dict[str, Any]:
        return {"headers": [(b"host", host), (b"origin", origin)]}

    _check_loopback(scope(b"localhost:8080 ", b"http://localhost:3000\t"))
    with pytest.raises(Forbidden):
        _check_loopback(scope(b"evil.example ", b"http://localhost:3000"))
    with pytest.raises(Forbidden):
        _check_loopback(scope(b"localhost", b"https://evil.example "))


def test_open_mode_refuses_what_a_page_of_another_site_sends_without_an_origin():
    """A browser's no-cors GET (an `<img>`, a `<script>`) says no Origin, but says it is
    cross-site: refused as a request with a foreign Origin is (also that of a page of this machine
    on another of its names, 127.0.0.1 for localhost, which the browser tells apart from another
    site's only by an Origin). A request that says a loopback Origin is served, as are those a
    browser sends from the same site, a link followed to a page (from review: a link to the
    dashboard in a chat or a doc), and those of clients that say neither."""
    def scope(*headers: tuple[bytes, bytes], method: str = "GET") -> dict[str, Any]:
        return {"method": method, "headers": [(b"host", b"localhost:8080"), *headers]}

    navigation = ((b"sec-fetch-site", b"cross-site"), (b"sec-fetch-mode", b"navigate"),
                  (b"sec-fetch-dest", b"document"))
    _check_loopback(scope(*navigation))
    with pytest.raises(Forbidden):
        _check_loopback(scope(*navigation, method="POST"))
    with pytest.raises(Forbidden):
        _check_loopback(scope(*navigation[:2], (b"sec-fetch-dest", b"iframe")))

    with pytest.raises(Forbidden):
        _check_loopback(scope((b"sec-fetch-site", b"cross-site")))
    with pytest.raises(Forbidden):
        _check_loopback(scope((b"sec-fetch-site", b"Cross-Site ")))
    _check_loopback(scope((b"sec-fetch-site", b"cross-site"), (b"origin", b"http://127.0.0.1:3000")))
    for site in (b"same-origin", b"same-site", b"none"):
        _check_loopback(scope((b"sec-fetch-site", site)))
    _check_loopback(scope())


def test_gateway_serves_through_the_handlers(adapters: Adapters):
    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=Gateway(workers=2))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return [
                await client.post("/v1/crashes", json={"sku": "g"}),
                await client.get("/v1/health"),
                await client.get("/nowhere"),
                await client.post("/v1/crashes", content=b"x" * (MAX_BODY_BYTES + 1),
                                  headers={"content-type": "application/json"}),
            ]

    posted, health, missing, huge = asyncio.run(scenario())
    assert posted.status_code == 202 and set(posted.json()) == {"eventId", "reportKey"}
    assert health.status_code == 200
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    assert (huge.status_code, huge.json()["error"]) == (413, "payload_too_large")


def test_concurrent_requests_never_see_each_others_bodies(adapters: Adapters):
    """Many requests at once through the gateway's worker threads: each is answered from its own body.
    Found in CI on two test processes: on cores that busy the burst took more than two seconds to
    drain, and the door shed part of it as it is meant to (QueueDelay); its queue never stands here."""
    sizes = [1 + n % 7 for n in range(240)]

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=Gateway(workers=8, queue=QueueDelay(target_s=3600)))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=60) as client:
            return await asyncio.gather(*(
                client.post("/v1/sessions", json=[{"sku": "g", "kind": "client"}] * size) if n % 2 else
                client.post("/v1/scores", json=[{"board": "b", "playerId": f"p{i}", "score": i} for i in range(size)])
                for n, size in enumerate(sizes)
            ))

    answers = asyncio.run(scenario())
    assert [(r.status_code, r.json()["accepted"]) for r in answers] == [(202, size) for size in sizes]


def test_each_thread_resolves_its_own_event():
    """Powertools keeps the current event on a class attribute; a resolver that did not keep it per
    thread would answer both requests with the body that came last."""
    app = create_resolver()
    both_in = threading.Barrier(2)

    @app.post("/echo")
    def echo() -> Response[str]:
        before = app.current_event.body
        both_in.wait(timeout=10)  # the other request is resolving now too
        return json_response(200, {"before": before, "after": app.current_event.body})

    answers: dict[str, Any] = {}

    def call(body: str) -> None:
        scope = {"method": "POST", "path": "/echo", "headers": [], "query_string": b""}
        answers[body] = json.loads(app.resolve(proxy_event(scope, body.encode()), LocalContext("echo"))["body"])

    threads = [threading.Thread(target=call, args=(body,)) for body in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {body: {"before": body, "after": body} for body in ("one", "two")}


def run_poller(adapters: Adapters, handler, until, function: str = "crash-consumer") -> Poller:
    stop = threading.Event()
    poller = Poller(adapters.log, function, "t", handler, stop)
    poller.start()
    deadline = time.monotonic() + 10
    while not until() and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    poller.join(timeout=10)
    return poller


def test_poller_commits_only_after_the_handler_succeeded_and_retries_failures(adapters: Adapters):
    adapters.log.publish("t", [OutgoingRecord(value=json.dumps(i).encode(), key=b"k") for i in range(5)])
    calls: list[list[int]] = []

    def flaky(event, context):
        values = [json.loads(r.value) for r in from_msk_event(event)]
        calls.append(values)
        if len(calls) < 3:
            raise ConnectionError("database away")
        return {"ok": True}

    poller = run_poller(adapters, flaky, lambda: len(calls) >= 3)
    assert calls[0] == calls[1] == calls[2] == [0, 1, 2, 3, 4]  # the same batch, again, until it succeeds
    assert poller.batches == 1
    # committed: a new member of the group gets nothing
    assert adapters.log.consumer("blackbox-crash-consumer", "t").poll(100, 1 << 20, 0.05) == []


@pytest.mark.parametrize(("function", "most"), [("ranking-worker", 2_000), ("minidump-processor", 5)])
def test_a_poller_hands_the_batches_the_deployments_event_source_mapping_does(adapters: Adapters, function: str,
                                                                             most: int):
    """Serve handed every function 500 records a batch: the ranking worker a quarter of what it is
    measured at (and AWS hands it up to 10,000), the minidump processor a hundred walks of seconds
    each, a batch retried whole, where AWS hands it 5."""
    adapters.log.publish("t", [OutgoingRecord(value=b"{}", key=b"k") for _ in range(2_000)])
    batches: list[int] = []

    def count(event, context):
        batches.append(len(from_msk_event(event)))

    run_poller(adapters, count, lambda: sum(batches) >= 2_000, function)
    assert sum(batches) == 2_000
    assert max(batches) == most


def test_a_retried_batch_s_line_says_what_the_engine_said(adapters: Adapters, caplog: pytest.LogCaptureFixture):
    """Found from outside: two consumer serves retried batches on "the issues store did not answer"
    where MariaDB had said deadlock; the engine's words went nowhere."""
    adapters.log.publish("t", [OutgoingRecord(value=b"1", key=b"k")])
    attempts: list[int] = []

    def deadlocked(event, context):
        attempts.append(1)
        try:
            raise OSError(1213, "Deadlock found when trying to get lock")
        except OSError as cause:
            raise StoreUnavailable("issues") from cause

    with caplog.at_level(logging.WARNING, logger="blackbox"):
        run_poller(adapters, deadlocked, lambda: len(attempts) >= 1)
    line = next(r for r in caplog.records if r.getMessage().startswith("batch failed"))
    assert "Deadlock found" in str(line.__dict__.get("cause"))


def test_a_batch_that_never_succeeds_is_never_committed(adapters: Adapters):
    adapters.log.publish("t", [OutgoingRecord(value=b"1", key=b"k")])
    attempts: list[int] = []

    def failing(event, context):
        attempts.append(1)
        raise RuntimeError("poison?")

    run_poller(adapters, failing, lambda: len(attempts) >= 2)
    again = adapters.log.consumer("blackbox-crash-consumer", "t").poll(100, 1 << 20, 0.05)
    assert [r.value for r in again] == [b"1"]


def test_the_spill_replayer_publishes_once_the_log_takes_writes_again(adapters: Adapters, monkeypatch):
    publish = adapters.log.publish
    outage = threading.Event()
    outage.set()

    def flaky(topic: str, records: list) -> None:
        if outage.is_set():
            raise TimeoutError("log away")
        publish(topic, records)

    monkeypatch.setattr(adapters.log, "publish", flaky)
    for n in range(3):
        capture.crash(adapters.log, adapters.spill, Posted(json.dumps({"sku": "g", "n": n}).encode()))
    assert len(adapters.spill.list(10)) == 3
    stop = threading.Event()
    replayer = spill_replayer(adapters, stop, interval_s=0.05)
    replayer.start()
    time.sleep(0.3)
    assert len(adapters.spill.list(10)) == 3  # still away: kept
    outage.clear()
    deadline = time.monotonic() + 10
    while adapters.spill.list(10) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    replayer.join()
    records = adapters.log.consumer("t", "crashes").poll(10, 1 << 20, 0.1)
    assert sorted(json.loads(r.value)["payload"]["n"] for r in records) == [0, 1, 2]


def test_a_consumer_that_cannot_be_made_yet_is_tried_again_not_given_up(adapters: Adapters):
    """Found from outside: a consumer made while Kafka restarts (its topic's creation timed out)
    raised before the poller's loop, the thread ended, and nothing made it again: that function
    never consumed again while its process lived, and its records expired unread."""
    adapters.log.publish("t", [OutgoingRecord(value=b"1", key=b"k")])
    real_consumer = adapters.log.consumer
    failures = iter([True, True])

    def consumer(group: str, topic: str):
        if next(failures, False):
            raise TimeoutError("CreateTopics timed out")
        return real_consumer(group, topic)

    calls: list[int] = []
    adapters.log.consumer = consumer  # type: ignore[method-assign]
    poller = run_poller(adapters, lambda event, context: calls.append(1), lambda: bool(calls))
    assert calls == [1] and poller.batches == 1


def test_a_failing_rewind_is_retried_not_fatal(adapters: Adapters):
    adapters.log.publish("t", [OutgoingRecord(value=b"1", key=b"k")])
    calls: list[int] = []
    real_consumer = adapters.log.consumer

    def consumer(group: str, topic: str):
        inner = real_consumer(group, topic)
        failures = iter([True, True, False])

        class FlakyRewind:
            def __getattr__(self, name: str):
                return getattr(inner, name)

            def rewind(self) -> None:
                if next(failures, False):
                    raise RuntimeError("Not coordinator")
                inner.rewind()

        return FlakyRewind()

    def handler(event, context):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("database away")
        return {}

    adapters.log.consumer = consumer  # type: ignore[method-assign]
    poller = run_poller(adapters, handler, lambda: len(calls) >= 2)
    assert len(calls) == 2 and poller.batches == 1 and not poller.is_alive()


def test_a_poller_tells_whether_its_consumer_closed_with_every_commit_the_groups(adapters: Adapters):
    """What a stop's last line rests on: a consumers worker exits non-zero when one is not."""

    class Unconfirmed:
        def poll(self, max_records: int, max_bytes: int, timeout_s: float) -> list[Any]:
            time.sleep(timeout_s)
            return []

        def close(self) -> bool:
            return False

    class Log:
        def consumer(self, group: str, topic: str) -> Unconfirmed:
            return Unconfirmed()

    stop = threading.Event()
    pollers = [Poller(log, "crash-consumer", "t", lambda event, context: None, stop)  # type: ignore[arg-type]
               for log in (adapters.log, Log())]
    for poller in pollers:
        poller.start()
    time.sleep(0.5)
    stop.set()
    for poller in pollers:
        poller.join(timeout=10)
    assert [poller.committed for poller in pollers] == [True, False]
