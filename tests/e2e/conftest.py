"""`blackbox serve` for the end-to-end tests, once per module and profile."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import Browser, expect, sync_playwright

from local_runtime.process import Serve
from tests.services import drop_database, mysql_url, namespace, settings

T = TypeVar("T")


def eventually(read: Callable[[], T], done: Callable[[T], bool], seconds: float = 30) -> T:
    """What `read` gives once `done` holds: consumers make what was accepted readable within seconds."""
    deadline = time.monotonic() + seconds
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@contextmanager
def running(profile: str, base: Path, env: dict[str, str] | None = None) -> Iterator[Serve]:
    """A server on `profile`; on `services` in a namespace of its own, dropped afterwards."""
    name = namespace()
    own = {
        "BLACKBOX_MYSQL_URL": mysql_url(name),
        "BLACKBOX_KAFKA_TOPIC_PREFIX": f"{name}.",
        "BLACKBOX_COUCHBASE_KEY_PREFIX": f"{name}:",
    } if profile == "services" else {}
    server = Serve(base / "data", base / "serve.log", profile, {**own, **(env or {})})
    failed = True
    try:
        server.start()
        yield server
        failed = False
    finally:  # a test that failed, or a serve that did not start, leaves no serve running either
        try:
            if server.process is not None:
                code = stopped(server)
                assert failed or code == 0
        finally:
            if profile == "services":
                drop_database(name)


def stopped(server: Serve) -> int:
    """Its exit code once stopped; killed if it hangs."""
    try:
        return server.stop()
    except subprocess.TimeoutExpired:
        assert server.process is not None
        server.process.kill()
        return server.process.wait()


def put_project(server: Serve, project: int, sku: str, server_key: str) -> None:
    """Creates a project of native uploads (what a studio does once)."""
    created = httpx.put(f"{server.url}/v1/projects/{project}", json={"sku": sku}, headers={"x-api-key": server_key})
    assert created.status_code == 201, created.text


@pytest.fixture(scope="module", params=["embedded", "services"])
def serve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One server per profile for the whole module."""
    with running(request.param, tmp_path_factory.mktemp(request.param)) as server:
        yield server


def browser_path() -> str:
    executable = shutil.which("chromium")
    assert executable, "chromium is installed by scripts/services start"
    return executable


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium through Playwright, for the dashboard's tests. A page's view may wait on a dozen
    requests, seconds on a loaded machine: its checks wait up to 15 s, not Playwright's 5 (those
    that something does not show pass as soon as it does not)."""
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=browser_path(), args=["--no-sandbox"])
        yield launched
        launched.close()


class Receiver:
    """A webhook receiver on loopback: what each path was sent, with its headers."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, str], bytes]] = []
        received = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, dict(self.headers), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def at(self, path: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
        return [(headers, json.loads(body)) for p, headers, body in self.got if p == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def verified(headers: dict[str, str], body: bytes, secret: str) -> bool:
    """As docs/api.md tells a receiver to check a delivery."""
    fields = dict(part.split("=", 1) for part in headers["X-Blackbox-Signature"].split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) < 300


def redeliver(server: Serve, group: str, topic: str) -> None:
    """Sends a consumer group (as named without the topic prefix) back to the first offset of
    every partition of a topic, with serve stopped: on restart it is handed every record again."""
    if server.profile == "embedded":
        with sqlite3.connect(server.data_dir / "log.sqlite") as db:
            assert db.execute("UPDATE commits SET next_offset = 0 WHERE grp = ?", (group,)).rowcount > 0
        return
    prefix = server.env["BLACKBOX_KAFKA_TOPIC_PREFIX"]
    consumer = Consumer({"bootstrap.servers": settings().kafka_bootstrap, "group.id": prefix + group,
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(prefix + topic, timeout=10).topics[prefix + topic].partitions
        consumer.commit(offsets=[TopicPartition(prefix + topic, p, 0) for p in partitions], asynchronous=False)
        back = consumer.committed([TopicPartition(prefix + topic, p) for p in partitions], timeout=10)
        assert [tp.offset for tp in back] == [0] * len(partitions)
    finally:
        consumer.close()
