"""The crash-reporting benchmark (the paper's questions), per profile, each comparison measured in
the same run: 1. capture throughput with 1 and 2 API processes against the Legacy CRS design, a
raw Kafka producer and a bare ASGI endpoint; 2. consumer persistence against the raw engines;
3. end-to-end latency at baseline and in a x10 spike; 4. query latency for 1 to 20,000 reports
(the paper's Tables 3-5)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvloop
from confluent_kafka import Producer
from rich.console import Console

from adapters.factory import Adapters, build, migrate
from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog, producer_config
from adapters.mysql.database import MysqlDatabase
from adapters.settings import Settings
from adapters.sql.queries import entry_values
from adapters.sql.schema import INSERT_COLUMNS
from api.requests import Posted
from benchmarks.isolation import environment, isolated
from crashes.model import CrashEnvelope, attachment_key, report_key
from crashes.persistence import persist_crashes
from lambdas import capture
from lambdas.functions import BATCH_RECORDS
from loadgen import payloads
from loadgen.http import Client
from loadgen.profiles import SPIKE_WINDOW
from loadgen.run import LoadConfig, LoadReport
from loadgen.run import run as run_load
from loadgen.stats import percentile
from local_runtime.poller import MAX_BATCH_BYTES
from local_runtime.process import Serve, free_port
from pipeline.idempotency import new_event_id
from ports import PUBLISH_TIMEOUT_S, IndexEntry, LogRecord, OutgoingRecord
from ports.timeutil import now_ms

Progress = Callable[[str], None]
CRASH_BYTES = 100 * 1024
SESSION_BATCH = 500
BENCH_TOPIC = "bench-crashes"
WORKER_COUNTS = (1, 2)
CAPTURE_ROLES = {"embedded": ("all",), "services": ("all", "api")}
"""Processes serving HTTP in the capture section (Blackbox's API workers, the Legacy collector's
and the bare endpoint's): one, and one per core."""


@dataclass(frozen=True)
class Plan:
    capture_seconds: float
    concurrency: int
    spike_rate: float
    spike_seconds: float
    query_sizes: tuple[int, ...]
    concurrent_sizes: tuple[int, ...]
    query_repeats: int
    consumer_records: int

    @staticmethod
    def for_run(quick: bool) -> Plan:
        if quick:
            return Plan(3, 32, 6, 15, (1, 200, 2_000), (1, 200), 2, 400)
        return Plan(10, 32, 10, 60, (1, 200, 2_000, 20_000), (1, 200, 2_000), 3, 2_000)


@dataclass
class Results:
    profile: str
    capture: dict[str, float] = field(default_factory=dict)
    """Name → per second; a rate measured with each of WORKER_COUNTS is named `name@workers`."""
    consumer: dict[str, float] = field(default_factory=dict)
    spike: LoadReport | None = None
    e2e: dict[str, dict[str, float]] = field(default_factory=dict)
    """baseline / spike → mean, p95 (ms)."""
    queries: dict[tuple[str, int], float] = field(default_factory=dict)
    """(summary | full | concurrent, reports) → seconds."""


def crash_bodies(count: int, sku: str, size: int = CRASH_BYTES) -> list[bytes]:
    rng = random.Random(3)
    return [json.dumps(payloads.crash(rng, sku, size)).encode() for _ in range(count)]


@dataclass(frozen=True)
class Loop:
    acknowledged: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.acknowledged / self.seconds


async def _closed_loop(url: str, path: str, bodies: Sequence[bytes], *, concurrency: int, seconds: float,
                       content_type: str, accepted: int) -> Loop:
    """Requests acknowledged (answered `accepted`) with `concurrency` clients sending back to back."""
    acknowledged = 0
    client = Client(url, {"content-type": content_type}, limit=concurrency, timeout_s=60)
    deadline = time.perf_counter() + seconds

    async def worker(n: int) -> None:
        nonlocal acknowledged
        i = n
        while time.perf_counter() < deadline:
            answer = await client.post(path, bodies[i % len(bodies)], {})
            acknowledged += answer.status == accepted
            i += concurrency

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    client.close()
    return Loop(acknowledged, time.perf_counter() - started)


def closed_loop(url: str, path: str, bodies: Sequence[bytes], plan: Plan, *, content_type: str = "application/json",
                accepted: int = 202) -> Loop:
    return uvloop.run(_closed_loop(url, path, bodies, concurrency=plan.concurrency, seconds=plan.capture_seconds,
                                    content_type=content_type, accepted=accepted))


# a Sentry SDK's crash as large as the JSON ones: an event (exception, frames) and an attachment
# whose base64 brings the report to about CRASH_BYTES
SENTRY_ATTACHMENT_BYTES = 72 * 1024
BENCH_PROJECT = 1


def sentry_envelopes(count: int) -> list[bytes]:
    rng = random.Random(5)
    bodies = []
    for _ in range(count):
        frames = [{"function": f"Game::System{n}::Update", "filename": f"system{n}.cpp",
                   "lineno": rng.randrange(1, 900), "instruction_addr": hex(rng.getrandbits(40))} for n in range(30)]
        event = json.dumps({"platform": "native", "release": "bench@1.0", "level": "fatal",
                            "exception": {"values": [{"type": "EXCEPTION_ACCESS_VIOLATION_READ",
                                                      "stacktrace": {"frames": frames}}]}}).encode()
        attachment = rng.randbytes(SENTRY_ATTACHMENT_BYTES)
        bodies.append(b"{}\n" + json.dumps({"type": "event", "length": len(event)}).encode() + b"\n" + event + b"\n"
                      + json.dumps({"type": "attachment", "length": len(attachment),
                                    "filename": "save.dat"}).encode() + b"\n" + attachment + b"\n")
    return bodies


def raw_producer_rate(settings: Settings, bodies: Sequence[bytes], seconds: float) -> float:
    """A bare confluent-kafka producer with capture's settings (acks=all, idempotent, lz4) sending the
    same payloads as fast as it can: what the broker takes, without HTTP, validation or envelopes."""
    log = KafkaEventLog(plaintext(settings.kafka_bootstrap), topic_prefix=settings.kafka_topic_prefix)
    log.ensure_topic("bench-raw")  # made and known before the clock starts, as capture's topics are
    log.close()
    producer = Producer(producer_config(plaintext(settings.kafka_bootstrap), PUBLISH_TIMEOUT_S))
    topic = f"{settings.kafka_topic_prefix}bench-raw"
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    delivered = 0

    def done(error: object, _: object) -> None:
        nonlocal delivered
        delivered += error is None

    started = time.perf_counter()
    i = 0
    while time.perf_counter() - started < seconds:
        try:
            producer.produce(topic, bodies[i % len(bodies)], on_delivery=done)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return delivered / (time.perf_counter() - started)


def _envelopes(count: int, sku: str) -> list[OutgoingRecord]:
    records = []
    for body in crash_bodies(count, sku):
        event_id = new_event_id("bench", None)
        envelope = CrashEnvelope(eventId=event_id, reportKey=report_key(event_id), receivedAt=now_ms(),
                                 sizeBytes=len(body), payload=json.loads(body))
        records.append(OutgoingRecord(envelope.model_dump_json().encode(), envelope.reportKey.encode()))
    return records


def _drain(a: Adapters, group: str, count: int, each: Callable[[list[LogRecord]], object]) -> float:
    """Seconds to poll `count` records of the bench topic in the poller's batches, calling `each`."""
    consumer = a.log.consumer(group, BENCH_TOPIC)
    seen = 0
    started = time.perf_counter()
    while seen < count:
        batch = consumer.poll(BATCH_RECORDS["crash-consumer"], MAX_BATCH_BYTES, timeout_s=1.0)
        each(batch)
        consumer.commit(batch)
        seen += len(batch)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def consumer_section(settings: Settings, plan: Plan, results: Results, progress: Progress) -> None:
    """The crash consumer's work (parse, signature, split attachments, upsert documents, index) on
    preloaded records, against each engine doing only its own part on the same data."""
    a = build(settings)
    try:
        n = plan.consumer_records
        progress(f"{settings.profile}: consumer, preloading {n} reports")
        records = _envelopes(n, "bench-consumer:pc")
        for start in range(0, n, 50):
            a.log.publish(BENCH_TOPIC, records[start:start + 50])
        megabytes = sum(len(r.value) for r in records) / 1e6
        progress(f"{settings.profile}: consumer persisting")
        batches: list[list[LogRecord]] = []

        def persist(batch: list[LogRecord]) -> None:
            batches.append(batch)
            persist_crashes(batch, a.documents, a.index, a.log, 3600)

        persisted = _drain(a, "bench-consumer", n, persist)
        progress(f"{settings.profile}: raw engines")
        raw_consume = _drain(a, "bench-raw", n, lambda _: None)
        # the raw engines get the consumer's own batches: CouchbaseMock's cost is per multi-operation
        # (it turns TCP_NODELAY off), so other batch sizes would not be the same work
        raw_documents = [{f"raw-{r.partition}-{r.offset}": r.value for r in batch} for batch in batches]
        started = time.perf_counter()
        for documents in raw_documents:
            a.documents.upsert_many(documents, 3600)
        raw_upsert = time.perf_counter() - started
        a.documents.delete_many([key for documents in raw_documents for key in documents])  # see drop_documents
        raw_insert = _raw_index_insert(settings, [len(batch) for batch in batches if batch])
        results.consumer = {
            "consumer": n / persisted, "consumerMB": megabytes / persisted, "rawConsume": n / raw_consume,
            "rawInsert": n / raw_insert, "rawUpsert": n / raw_upsert,
            "rawCombined": n / (raw_consume + raw_insert + raw_upsert),
        }
    finally:
        a.close()


def _raw_index_insert(settings: Settings, sizes: Sequence[int]) -> float:
    """Seconds to insert index rows with plain multi-row INSERTs, one a batch of these sizes, into a
    scratch copy of the table."""
    n = sum(sizes)
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    entries = [IndexEntry(f"{i:032x}", str(uuid.uuid4()), "raw:pc", now_ms(), CRASH_BYTES, "ACCESS_VIOLATION",
                          "3221225477", "pc", "1.0.0", "0123456789abcdef") for i in range(n)]
    rows = [entry_values(entry, i + 1, now_ms()) for i, entry in enumerate(entries)]
    columns = ", ".join(INSERT_COLUMNS)
    if settings.profile == "services":
        database = MysqlDatabase(settings.mysql_url)
        try:
            with database.connection().cursor() as cursor:
                cursor.execute("CREATE TABLE raw_reports LIKE reports")
                marks = ", ".join(["%s"] * len(INSERT_COLUMNS))
                started = time.perf_counter()
                for start, end in itertools.pairwise(bounds):
                    cursor.executemany(f"INSERT INTO raw_reports ({columns}) VALUES ({marks})", rows[start:end])
                return time.perf_counter() - started
        finally:
            database.close()
    conn = sqlite3.connect(settings.data_dir / "raw.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"CREATE TABLE raw_reports ({columns})")
    marks = ", ".join("?" * len(INSERT_COLUMNS))
    started = time.perf_counter()
    for start, end in itertools.pairwise(bounds):
        conn.execute("BEGIN")
        conn.executemany(f"INSERT INTO raw_reports VALUES ({marks})", rows[start:end])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


CAPTURE_SKU = "bench-cap:pc"


def capture_section(serve: Serve, settings: Settings, plan: Plan, results: Results, progress: Progress) -> int:
    """Blackbox's capture with `serve.workers` API processes; the crash reports it acknowledged."""
    single = [json.dumps({"sku": CAPTURE_SKU, "kind": "client"}).encode()]
    batch = [json.dumps([{"sku": CAPTURE_SKU, "kind": "client"}] * SESSION_BATCH).encode()]
    crashes = crash_bodies(16, CAPTURE_SKU)
    at = f"@{serve.workers}" + ("" if serve.role == "all" else f":{serve.role}")
    workers = f"{serve.workers} API process{'es' if serve.workers != 1 else ''} (--role {serve.role})"
    progress(f"{settings.profile}: capture with {workers}, single session events")
    results.capture[f"sessionsSingle{at}"] = closed_loop(serve.url, "/v1/sessions", single, plan).rate
    progress(f"{settings.profile}: capture with {workers}, batches of {SESSION_BATCH} session events")
    results.capture[f"sessionsBatched{at}"] = closed_loop(serve.url, "/v1/sessions", batch, plan).rate * SESSION_BATCH
    progress(f"{settings.profile}: capture with {workers}, 100 KB crash reports")
    loop = closed_loop(serve.url, "/v1/crashes", crashes, plan)
    results.capture[f"crashes{at}"] = loop.rate
    progress(f"{settings.profile}: capture with {workers}, 100 KB Sentry envelopes")
    httpx.put(f"{serve.url}/v1/projects/{BENCH_PROJECT}", json={"sku": CAPTURE_SKU}).raise_for_status()
    envelopes = closed_loop(serve.url, f"/api/{BENCH_PROJECT}/envelope/", sentry_envelopes(16), plan,
                            content_type="application/x-sentry-envelope", accepted=200)
    results.capture[f"sentryEnvelopes{at}"] = envelopes.rate
    return loop.acknowledged + envelopes.acknowledged


def raw_producer_section(settings: Settings, plan: Plan, results: Results, progress: Progress) -> None:
    progress("services: raw Kafka producer, the same reports")
    results.capture["rawProducer"] = raw_producer_rate(settings, crash_bodies(16, CAPTURE_SKU), plan.capture_seconds)


def baselines_section(settings: Settings, plan: Plan, results: Results, progress: Progress) -> None:
    """With each of WORKER_COUNTS processes: the Legacy CRS (insert before answering) on 100 KB
    crash reports, a bare ASGI endpoint on single session events, and serve's gateway with handlers
    that do nothing (benchmarks.floor) on both."""
    store = (["--mysql-url", settings.mysql_url] if settings.profile == "services"
             else ["--sqlite", str(settings.data_dir / "legacy.sqlite")])
    single = [json.dumps({"sku": CAPTURE_SKU, "kind": "client"}).encode()]
    for workers in WORKER_COUNTS:
        progress(f"{settings.profile}: Legacy CRS with {workers} processes, 100 KB crash reports")
        with _server("benchmarks.legacy", workers, *store) as url:
            results.capture[f"legacy@{workers}"] = closed_loop(url, "/v1/crashes",
                                                               crash_bodies(16, "bench-legacy:pc"), plan).rate
        progress(f"{settings.profile}: bare ASGI endpoint with {workers} processes, single session events")
        with _server("benchmarks.bare", workers) as url:
            results.capture[f"bare@{workers}"] = closed_loop(url, "/v1/sessions", single, plan).rate
        progress(f"{settings.profile}: serve's gateway, handlers that do nothing, with {workers} processes")
        with _server("benchmarks.floor", workers) as url:
            results.capture[f"floorSingle@{workers}"] = closed_loop(url, "/v1/sessions", single, plan).rate
            results.capture[f"floorCrashes@{workers}"] = closed_loop(url, "/v1/crashes",
                                                                     crash_bodies(16, CAPTURE_SKU), plan).rate


@contextmanager
def _server(module: str, workers: int, *args: str) -> Iterator[str]:
    """The URL of `python -m module` serving with `workers` processes, until the block ends."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", module, "--port", str(port), "--workers", str(workers), *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(url)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.post(f"{url}/v1/crashes", content=b"{}", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def e2e_section(serve: Serve, plan: Plan, results: Results, progress: Progress) -> None:
    progress(f"{serve.profile}: end to end, x10 spike over {plan.spike_rate:g} req/s")
    config = LoadConfig(url=serve.url, profile="spike", rate=plan.spike_rate, duration_s=plan.spike_seconds,
                        crash_kb=100, mix=(0.5, 0.3, 0.2))
    report = run_load(config, Console(stderr=True, quiet=True))
    results.spike = report
    spike_from, spike_to = (report.started_ms + share * plan.spike_seconds * 1000 for share in SPIKE_WINDOW)
    windows = {"baseline": [ms for at, ms in report.verification.visibility if not spike_from <= at < spike_to],
               "spike": [ms for at, ms in report.verification.visibility if spike_from <= at < spike_to]}
    results.e2e = {name: {"mean": sum(ms) / len(ms), "p95": percentile(ms, 95)} for name, ms in windows.items() if ms}


def query_section(serve: Serve, settings: Settings, plan: Plan, results: Results, progress: Progress) -> None:
    sku = "bench-query:pc"
    total = max(plan.query_sizes)
    progress(f"{settings.profile}: queries, loading {total} reports of 100 KB")
    a = build(settings)
    try:
        bodies = crash_bodies(32, sku)
        for i in range(total):
            capture.crash(a.log, a.spill, Posted(bodies[i % len(bodies)]))
    finally:
        a.close()
    with httpx.Client(base_url=serve.url, timeout=600) as client:
        deadline = time.monotonic() + 600
        while _count(client, sku) < total:
            if time.monotonic() > deadline:
                raise RuntimeError("the query reports were not all persisted in 10 minutes")
            time.sleep(1)
        for size in plan.query_sizes:
            for fields in ("summary", "full"):
                progress(f"{settings.profile}: queries, {size} reports, {fields}")
                samples = [_query(client, sku, size, fields) for _ in range(plan.query_repeats)]
                results.queries[(fields, size)] = sum(samples) / len(samples)
    for size in plan.concurrent_sizes:
        progress(f"{settings.profile}: queries, 10 concurrent of {size} reports")
        results.queries[("concurrent", size)] = _concurrent(serve.url, sku, size)


def _settle(url: str, sku: str, expected: int, timeout_s: float = 900) -> None:
    """Waits until the `expected` crash reports of `sku` are persisted: a flood's backlog is done."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, timeout=60) as client:
        while _count(client, sku) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{expected} crash reports of {sku} not persisted in {timeout_s:.0f} s")
            time.sleep(0.5)


def _count(client: httpx.Client, sku: str) -> int:
    series = client.get("/v1/stats", params={"sku": sku, "granularity": "hour"}).json()["series"]
    return sum(b["crashes"] for b in series)


def _query(client: httpx.Client, sku: str, size: int, fields: str) -> float:
    """Seconds to fetch `size` reports, a page of at most 1,000 at a time."""
    started = time.perf_counter()
    params: dict[str, Any] = {"sku": sku, "fields": fields, "limit": min(size, 1000)}
    fetched = 0
    while fetched < size:
        page = client.get("/v1/crashes", params=params).json()
        fetched += len(page["reports"])
        params["cursor"] = page["nextCursor"]
        params["limit"] = min(size - fetched, 1000)
    return time.perf_counter() - started


def _concurrent(url: str, sku: str, size: int) -> float:
    """Mean seconds per query with 10 full queries at once (the paper's Table 5)."""
    latencies: list[float] = []
    failures: list[Exception] = []

    def one() -> None:
        with httpx.Client(base_url=url, timeout=600) as client:
            try:
                latencies.append(_query(client, sku, size, "full"))
            except httpx.HTTPError as exc:  # a mean over the survivors would flatter: the run fails
                failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} of 10 concurrent queries of {size} reports failed: {failures[0]!r}")
    return sum(latencies) / len(latencies)


def drop_documents(settings: Settings) -> None:
    """Deletes the documents of every report indexed so far. CouchbaseMock holds each document in its
    heap until it expires, and a full run writes GBs: a later section or run would find it out of
    memory (the embedded profile's documents go with its data directory)."""
    if settings.profile != "services":
        return
    database = MysqlDatabase(settings.mysql_url)
    try:
        with database.connection().cursor() as cursor:
            cursor.execute("SELECT report_key, attachments FROM reports")
            rows = cursor.fetchall()
    finally:
        database.close()
    keys = [key for report, names in rows for key in (report, *(attachment_key(report, n) for n in json.loads(names)))]
    a = build(settings)
    try:
        a.documents.delete_many(keys)
    finally:
        a.close()


def run_profile(profile: str, plan: Plan, progress: Progress, log_dir: Path) -> Results:
    results = Results(profile)
    with isolated(profile) as settings:
        migrate(settings)
        try:
            consumer_section(settings, plan, results, progress)
            # the serve's settings: where the query section puts reports on its log (embedded: its file)
            served = settings.model_copy(update={"data_dir": settings.data_dir / "serve"})
            log = log_dir / f"bench-serve-{profile}.log"
            # as serve runs by default, the consumers beside the API; on services also the API alone,
            # as the machines of a capture tier (`--role api`) run it, the consumers started after it
            acknowledged = 0
            for role in CAPTURE_ROLES[profile]:
                for workers in WORKER_COUNTS:
                    serve = Serve(served.data_dir, log, profile, environment(settings), role=role, workers=workers)
                    serve.start()
                    consumers = Serve(settings.data_dir / "consumers", log, profile, environment(settings),
                                      role="consumers")
                    try:
                        acknowledged += capture_section(serve, settings, plan, results, progress)
                        progress(f"{profile}: waiting for the consumers to catch up")
                        if role == "api":
                            consumers.start()
                        # the next measure does not share the CPU with this backlog
                        _settle(serve.url, CAPTURE_SKU, acknowledged)
                    finally:
                        serve.stop()
                        if consumers.process is not None:
                            consumers.stop()
                    drop_documents(settings)
            if profile == "services":
                raw_producer_section(settings, plan, results, progress)
            serve = Serve(served.data_dir, log, profile, environment(settings))
            serve.start()
            try:
                e2e_section(serve, plan, results, progress)
                drop_documents(settings)
                query_section(serve, served, plan, results, progress)
            finally:
                serve.stop()
        finally:
            drop_documents(settings)
        baselines_section(settings, plan, results, progress)
    return results
