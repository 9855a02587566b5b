"""Fault injection on the services profile: bursts of crashes, sessions and scores while serve is
killed with SIGKILL and restarted, MariaDB is stopped for 10 s, MariaDB and CouchbaseMock are down
together for 10 s (capture must not notice), Kafka is stopped for 10 s, and poison records, malformed
or with a value MariaDB refuses, are put on the topics. Clients send an Idempotency-Key and retry what was not
acknowledged, as real ones do. After each fault every accepted crash is queryable exactly once,
session counters and leaderboards equal the brute-force totals, and at the end the dead-letter
topic holds every poison record and nothing else, and a stop leaves every consumer's group at
its topic's end."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from lambdas.functions import CONSUMERS
from local_runtime.lag import lags
from local_runtime.process import Serve
from tests.brute import BruteBoard
from tests.services import drop_database, mysql_url, namespace, settings

# on the engines of scripts/services, which it stops: alone, after every other test (Makefile)
pytestmark = [pytest.mark.services, pytest.mark.outage]

ROOT = Path(__file__).resolve().parents[2]
SKU = "faults:pc"
XP, BEST = "faults-xp", "faults-best"
OUTAGE_S = 10
CONCURRENCY = 16


@dataclass
class Deployment:
    serve: Serve
    topic_prefix: str
    consumers: list[Serve] = field(default_factory=list)
    """serves of --role consumers, if the one above does not run them"""


@dataclass
class Ledger:
    """What the clients were told was accepted (202), by Idempotency-Key."""

    crash_event_ids: dict[str, str] = field(default_factory=dict)
    sessions: int = 0
    xp: BruteBoard = field(default_factory=lambda: BruteBoard("desc", "incr"))
    best: BruteBoard = field(default_factory=lambda: BruteBoard("desc", "best"))
    poison: list[bytes] = field(default_factory=list)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    base = tmp_path_factory.mktemp("faults")
    name = namespace()
    env = {"BLACKBOX_MYSQL_URL": mysql_url(name), "BLACKBOX_KAFKA_TOPIC_PREFIX": f"{name}.",
           "BLACKBOX_COUCHBASE_KEY_PREFIX": f"{name}:"}
    server = Serve(base / "data", base / "serve.log", "services", env)
    server.start()
    with httpx.Client(base_url=server.url) as client:
        assert client.put(f"/v1/leaderboards/{XP}", json={"order": "desc", "operator": "incr"}).status_code == 201
    yield Deployment(server, f"{name}.")
    if server.process is not None:
        assert server.stop() == 0
    services("start")  # whatever a failed test left down
    drop_database(name)


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    return Ledger()


def services(*args: str) -> None:
    subprocess.run([str(ROOT / "scripts" / "services"), *args], check=True, capture_output=True)


def requests_for(tag: str, n: int) -> list[tuple[str, str, Any]]:
    """(Idempotency-Key, path, body): a crash, a batch of 5 sessions and two scores per step."""
    out: list[tuple[str, str, Any]] = []
    for i in range(n):
        out.append((f"{tag}-c{i}", "/v1/crashes", {"sku": SKU, "tag": tag, "i": i, "stackTrace": f"#0 in f{i % 3}()"}))
        out.append((f"{tag}-s{i}", "/v1/sessions", [{"sku": SKU, "kind": "client", "playerId": f"p{i}"}] * 5))
        out.append((f"{tag}-k{i}", "/v1/scores", [{"board": XP, "playerId": f"p{i % 40}", "score": i % 7 + 1},
                                                 {"board": BEST, "playerId": f"p{i % 40}", "score": i * 13 % 997}]))
    return out


def record(ledger: Ledger, path: str, body: Any, answer: dict[str, Any], key: str) -> None:
    if path == "/v1/crashes":
        ledger.crash_event_ids[key] = answer["eventId"]
    elif path == "/v1/sessions":
        ledger.sessions += len(body)
    else:
        for score in body:
            (ledger.xp if score["board"] == XP else ledger.best).apply(score["playerId"], score["score"])


async def _send(base_url: str, requests: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any, Any]]:
    limit = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        async def one(key: str, path: str, body: Any) -> tuple[str, str, Any, Any]:
            async with limit:
                try:
                    response = await client.post(path, json=body, headers={"Idempotency-Key": key})
                except httpx.TransportError as exc:
                    return key, path, body, exc
                return key, path, body, response

        return list(await asyncio.gather(*(one(*r) for r in requests)))


def burst(deployment: Deployment, ledger: Ledger, tag: str, fault: Callable[[], None] | None, n: int = 150) -> None:
    """Sends the burst with `fault` starting a moment in; then retries whatever was not
    acknowledged (same keys) until everything is, and records what was accepted."""
    requests = requests_for(tag, n)
    faulting = threading.Thread(target=lambda: (time.sleep(0.5), fault())) if fault else None
    if faulting:
        faulting.start()
    answers = asyncio.run(_send(deployment.serve.url, requests))
    if faulting:
        faulting.join()
    deadline = time.monotonic() + 180
    while True:
        pending = []
        for key, path, body, answer in answers:
            if isinstance(answer, httpx.Response) and answer.status_code == 202:
                record(ledger, path, body, answer.json(), key)
            else:
                assert not isinstance(answer, httpx.Response) or answer.status_code == 503, (key, path, answer.text)
                pending.append((key, path, body))
        if not pending:
            return
        assert time.monotonic() < deadline, f"{len(pending)} requests never acknowledged"
        time.sleep(1)
        answers = asyncio.run(_send(deployment.serve.url, pending))


def verify(deployment: Deployment, ledger: Ledger) -> None:
    with httpx.Client(base_url=deployment.serve.url, timeout=30) as client:
        deadline = time.monotonic() + 180
        while True:
            try:
                reports = list_reports(client)
                sessions = sum(b["sessions"] for b in get(client, "/v1/stats", sku=SKU, granularity="hour")["series"])
                xp, best = top(client, XP), top(client, BEST)
            except Unanswered:  # a store just came back: the query is answered 503 until it reconnects
                assert time.monotonic() < deadline, "queries kept failing"
                time.sleep(1)
                continue
            done = (len(reports) >= len(ledger.crash_event_ids) and sessions >= ledger.sessions
                    and xp == ledger.xp.ordered() and best == ledger.best.ordered())
            if done or time.monotonic() > deadline:
                break
            time.sleep(1)
        if not done:  # printed after the failure's diff: CI keeps no serve.log to read afterwards
            print("\n".join(told_of(serve) for serve in [deployment.serve, *deployment.consumers]))
        assert Counter(r["eventId"] for r in reports) == Counter(set(ledger.crash_event_ids.values()))
        assert sessions == ledger.sessions
        assert xp == ledger.xp.ordered()
        assert best == ledger.best.ordered()


def told_of(serve: Serve, last: int = 20) -> str:
    """Serve's warnings and errors (how often each kind came from each function, and the last few),
    and where each of its threads is now (SIGUSR1): a consumer that stopped moving may say nothing."""
    before = serve.log_path.stat().st_size
    if serve.process is not None:
        os.kill(serve.process.pid, signal.SIGUSR1)
        time.sleep(2)
    data = serve.log_path.read_bytes()
    told = [entry for line in data.decode(errors="replace").splitlines()
            if isinstance(entry := _json(line), dict) and entry.get("level") in ("WARNING", "ERROR")]
    stacks = [line for line in data[before:].decode(errors="replace").splitlines() if _json(line) is None]
    kinds = Counter((entry.get("function") or entry.get("function_name", ""),
                     re.sub(r"\d+", "N", str(entry.get("message", ""))[:100])) for entry in told)
    return "\n".join([f"{serve.log_path.name}: serve's warnings and errors, by function and kind:",
                      *(f"{n:6} {function}: {kind}" for (function, kind), n in kinds.most_common()),
                      f"the last {last}:", *(json.dumps(entry)[:600] for entry in told[-last:]),
                      "its threads now:", *stacks])


def _json(line: str) -> Any:
    """The line's JSON (a log entry), or None."""
    try:
        return json.loads(line)
    except ValueError:
        return None


class Unanswered(Exception):
    pass


def get(client: httpx.Client, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    if response.status_code == 503:
        raise Unanswered(response.text)
    assert response.status_code in (200, 404), response.text
    return response.json()


def list_reports(client: httpx.Client) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    params: dict[str, Any] = {"sku": SKU, "limit": 1000}
    while True:
        page = get(client, "/v1/crashes", **params)
        reports += page["reports"]
        if page["nextCursor"] is None:
            return reports
        params["cursor"] = page["nextCursor"]


def top(client: httpx.Client, board: str) -> list[dict[str, Any]]:
    answer = get(client, f"/v1/leaderboards/{board}/top", limit=1000)
    return answer.get("entries", [])


def test_a_burst_without_faults_is_the_baseline(deployment: Deployment, ledger: Ledger):
    burst(deployment, ledger, "calm", None, n=60)
    verify(deployment, ledger)


def test_serve_killed_with_sigkill_and_restarted(deployment: Deployment, ledger: Ledger):
    def kill_and_restart() -> None:
        time.sleep(1)
        deployment.serve.stop(signal.SIGKILL)
        time.sleep(1)
        deployment.serve.start()

    burst(deployment, ledger, "kill", kill_and_restart)
    verify(deployment, ledger)


def test_mariadb_stopped_for_10_seconds(deployment: Deployment, ledger: Ledger):
    def outage() -> None:
        services("stop", "mariadb")
        time.sleep(OUTAGE_S)
        services("start-one", "mariadb")

    burst(deployment, ledger, "mariadb", outage)
    verify(deployment, ledger)


def test_couchbase_and_mariadb_stopped_together_while_crashes_are_captured(deployment: Deployment, ledger: Ledger):
    def outage() -> None:
        services("pause", "couchbase-mock")
        services("stop", "mariadb")
        try:
            time.sleep(OUTAGE_S)
        finally:
            services("start-one", "mariadb")
            services("resume", "couchbase-mock")

    # capture needs only the log: every request is answered 202 the first time, none is retried
    requests = requests_for("stores", 60)
    faulting = threading.Thread(target=outage)
    faulting.start()
    time.sleep(1)
    answers = asyncio.run(_send(deployment.serve.url, requests))
    stores_were_down = faulting.is_alive()
    faulting.join()
    assert stores_were_down
    for key, path, body, answer in answers:
        assert isinstance(answer, httpx.Response) and answer.status_code == 202, (key, answer)
        record(ledger, path, body, answer.json(), key)
    verify(deployment, ledger)


def test_kafka_stopped_for_10_seconds(deployment: Deployment, ledger: Ledger):
    def outage() -> None:
        services("stop", "kafka")
        time.sleep(OUTAGE_S)
        services("start-one", "kafka")

    burst(deployment, ledger, "kafka", outage)
    verify(deployment, ledger)


def test_poison_goes_to_the_dead_letters_and_only_poison(deployment: Deployment, ledger: Ledger):
    producer = Producer({"bootstrap.servers": settings().kafka_bootstrap})
    # malformed, and well-formed with a value an engine refuses (MariaDB: BIGINT out of range)
    too_big = 2**64
    poison = {
        "crashes": [b"\x00not json", b'{"eventId": 5}', b'{"eventId": "e", "reportKey": "%s", "receivedAt": %d, '
                    b'"sizeBytes": 2, "payload": {"sku": "%s"}}' % (uuid.uuid4().hex.encode(), too_big, SKU.encode())],
        "sessions": [b"[1, 2", b'{"sku": "x"}',
                     b'{"eventId": "e", "receivedAt": %d, "sessions": [{"sku": "%s", "kind": "client"}]}' % (
                         too_big, SKU.encode())],
        "scores": [b"null", b'{"board": 1}',
                   b'{"eventId": "e", "receivedAt": 1, "scores": [{"board": "%s", "playerId": "p", "score": %d}]}' % (
                       BEST.encode(), too_big)],
    }
    for topic, values in poison.items():
        for value in values:
            producer.produce(deployment.topic_prefix + topic, value=value, key=uuid.uuid4().bytes)
            ledger.poison.append(value)
    assert producer.flush(10) == 0
    burst(deployment, ledger, "poison", None, n=30)  # good data keeps flowing past the poison
    verify(deployment, ledger)
    # every poison record and nothing else; one may come twice: a batch that fails for an engine
    # between setting a record aside and storing its offset sets it aside again when retried (a
    # dead letter is at least once, as it must be never lost), as this module's outages make likely
    assert set(dead_letters(deployment, len(ledger.poison))) == set(ledger.poison)


def test_a_stop_after_the_faults_leaves_every_group_at_its_topics_end(deployment: Deployment, ledger: Ledger):
    """Last: a consumer asks for its commits and waits for none (adapters.kafka.log); a stop sends
    what waits and waits for the answers, so serve's last line that every consumed batch is
    committed holds, Kafka's outage and the poison before it notwithstanding."""
    verify(deployment, ledger)  # all of it applied, so all of it consumed
    assert deployment.serve.stop() == 0
    assert deployment.serve.log_path.read_text().rstrip().endswith("every consumed batch is committed")
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), topic_prefix=deployment.topic_prefix,
                        create_topics=False)
    try:
        behind = {lag.function: lag.behind for lag in lags(log)}
    finally:
        log.close()
    assert behind == dict.fromkeys(CONSUMERS, 0)


def dead_letters(deployment: Deployment, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": settings().kafka_bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([deployment.topic_prefix + "deadletter"])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    # read until the expected ones are in and a few quiet seconds show there are no more
    quiet_until = None
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
            quiet_until = None
        elif len(values) >= expected:
            quiet_until = quiet_until or time.monotonic() + 5
            if time.monotonic() > quiet_until:
                break
    consumer.close()
    return values
