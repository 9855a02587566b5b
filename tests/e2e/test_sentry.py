"""The real sentry-sdk, unchanged, pointed at `blackbox serve` by a DSN of a project: exceptions and
messages with attachments land as crash reports of the project's sku, sessions as counts, each
exactly once across retries; keys and projects are checked as a Sentry SDK expects."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import brotli
import httpx
import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import HttpTransport

from local_runtime.process import Serve
from reporters.sentry import dsn
from tests.e2e.conftest import put_project, running

INGEST, TITLE, SERVER, READ = "ingest-Se9t", "title-Tt4x", "server-Sv2k", "read-Rd8m"
KEYS = {
    "BLACKBOX_API_KEYS__INGEST": json.dumps([INGEST, {"key": TITLE, "skus": ["ember:pc"]}]),
    "BLACKBOX_API_KEYS__SERVER": json.dumps([SERVER]),
    "BLACKBOX_API_KEYS__READ": json.dumps([READ]),
}
PROJECT, SKU, RELEASE = 42, "skyrift:pc", "skyrift@1.4.3"


class ShaderError(Exception):
    pass


class SaveError(Exception):
    pass


def compile_shader() -> None:
    raise ShaderError("device lost")


def render_frame() -> None:
    compile_shader()


@pytest.fixture(scope="module", params=["embedded", "services"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(request.param, tmp_path_factory.mktemp(f"sentry-{request.param}"), KEYS) as serve:
        put_project(serve, PROJECT, SKU, SERVER)
        yield serve


@pytest.fixture
def sent(server: Serve) -> Iterator[list[bytes]]:
    """The SDK with its own HTTP transport, pointed at the server; what it sent, as bytes."""
    bodies: list[bytes] = []

    class Recording(HttpTransport):
        def capture_envelope(self, envelope: Envelope) -> None:
            bodies.append(envelope.serialize())
            super().capture_envelope(envelope)

    sentry_sdk.init(dsn=dsn("http", INGEST, server.url.removeprefix("http://"), PROJECT), transport=Recording,
                    release=RELEASE, default_integrations=False, transport_queue_size=100)
    try:
        with sentry_sdk.isolation_scope():
            yield bodies
    finally:
        sentry_sdk.get_client().close()


def reader(server: Serve) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"x-api-key": READ}, timeout=30)


def eventually(check: Callable[[], Any], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert found
    return found


def reports_of(client: httpx.Client, **filters: str) -> list[dict[str, Any]]:
    page = client.get("/v1/crashes", params={"sku": SKU, "limit": 1000, "fields": "full", **filters})
    assert page.status_code == 200, page.text
    reports: list[dict[str, Any]] = page.json()["reports"]
    return reports


def test_projects_are_created_moved_listed_and_read_back_by_the_right_keys(server: Serve) -> None:
    url = f"{server.url}/v1/projects/7"
    assert httpx.put(url, json={"sku": "ember:pc"}, headers={"x-api-key": INGEST}).status_code == 403
    assert httpx.put(url, json={"sku": "ember:pc"}, headers={"x-api-key": SERVER}).status_code == 201
    moved = httpx.put(url, json={"sku": "ember:ps5"}, headers={"x-api-key": SERVER})
    assert (moved.status_code, moved.json()["sku"]) == (200, "ember:ps5")
    with reader(server) as client:
        assert client.get("/v1/projects/7").json()["sku"] == "ember:ps5"
        assert client.get("/v1/projects/8").status_code == 404
        listed = client.get("/v1/projects", params={"limit": 1})
        assert [p["projectId"] for p in listed.json()["projects"]] == [7]
        after = client.get("/v1/projects", params={"cursor": listed.json()["nextCursor"]}).json()
        assert [p["projectId"] for p in after["projects"]] == [PROJECT] and after["nextCursor"] is None
    for bad in ({"sku": "no spaces"}, {"sku": "ember:pc", "name": "x"}, ["ember:pc"]):
        assert httpx.put(url, json=bad, headers={"x-api-key": SERVER}).status_code == 400


def test_an_exception_sent_by_the_sdk_is_a_report_of_the_projects_sku(server: Serve, sent: list[bytes]) -> None:
    # the SDK compresses with brotli whenever it can import it, as here (found from outside: every
    # such envelope was refused 415, which the SDK drops without a word)
    assert sentry_sdk.get_client().transport._compression_algo == "br"  # type: ignore[union-attr]
    sentry_sdk.set_user({"id": "player-1029"})
    try:
        render_frame()
    except ShaderError:
        event_id = sentry_sdk.capture_exception()
    sentry_sdk.flush()
    with reader(server) as client:
        [report] = eventually(lambda: reports_of(client, crashType="ShaderError"))
    assert (report["buildVersion"], report["payload"]["playerId"]) == (RELEASE, "player-1029")
    assert report["payload"]["sentryEvent"]["event_id"] == event_id
    # innermost first: the frame that raised, then its caller
    frames = report["payload"]["stackTrace"].splitlines()
    assert "compile_shader" in frames[0] and "render_frame" in frames[1]


def test_a_message_with_attachments_keeps_them_byte_exact(server: Serve, sent: list[bytes]) -> None:
    save = bytes(range(256)) * 40
    sentry_sdk.get_current_scope().add_attachment(bytes=save, filename="save.dat")
    sentry_sdk.get_current_scope().add_attachment(bytes=b"frame 1\nframe 2\n", filename="logs/game.log")
    sentry_sdk.capture_message("Shader cache corrupt")
    sentry_sdk.flush()
    with reader(server) as client:
        [report] = eventually(lambda: reports_of(client, crashType="Shader cache corrupt"))
        names = sorted(report["attachments"])
        assert names == ["game.log", "save.dat"]
        got = client.get(f"/v1/crashes/{report['reportId']}/attachments/save.dat")
        assert got.content == save


def test_an_envelope_sent_again_is_one_report_and_its_sessions_count_once(server: Serve,
                                                                          sent: list[bytes]) -> None:
    try:
        raise SaveError("disk full")
    except SaveError:
        sentry_sdk.capture_exception()
    scope = sentry_sdk.get_isolation_scope()
    scope.start_session()
    scope.end_session()
    sentry_sdk.flush()
    with reader(server) as client:
        before = eventually(lambda: reports_of(client, crashType="SaveError"))
        sessions_before = eventually(lambda: stats_sessions(client))
        # a client that did not hear the answer sends the same bytes again
        for body in sent:
            again = httpx.post(f"{server.url}/api/{PROJECT}/envelope/", content=body,
                               headers={"X-Sentry-Auth": f"Sentry sentry_key={INGEST}, sentry_version=7",
                                        "Content-Type": "application/x-sentry-envelope"})
            assert again.status_code == 200, again.text
        time.sleep(2)  # what a second copy would take to be indexed
        assert len(before) == 1 and reports_of(client, crashType="SaveError") == before
        assert stats_sessions(client) == sessions_before == 1
        # the event's id is its report's Idempotency-Key (found from outside, now in the contract): a
        # reporter that sends the crash to /v1/crashes too, under that key, makes the same report
        [event_id] = [json.loads(body.split(b"\n", 1)[0])["event_id"] for body in sent if b'"type":"event"' in body]
        posted = httpx.post(f"{server.url}/v1/crashes", json={"sku": SKU, "crashType": "SaveError"},
                            headers={"x-api-key": INGEST, "Idempotency-Key": event_id})
        assert posted.status_code == 202 and posted.json()["eventId"] == before[0]["eventId"]


def stats_sessions(client: httpx.Client, sku: str = SKU) -> int:
    series = client.get("/v1/stats", params={"sku": sku, "granularity": "hour"}).json()["series"]
    return sum(bucket["sessions"] for bucket in series)


def test_each_session_counts_once_by_its_sid_whatever_comes_with_it(server: Serve) -> None:
    # found from outside: an upload's sids together were its key, so a session sent again beside a
    # new one, or twice in one upload, was counted again
    sku, project = "skyrift:sids", 77
    assert httpx.put(f"{server.url}/v1/projects/{project}", json={"sku": sku},
                     headers={"x-api-key": SERVER}).status_code == 201

    def update(sid: str) -> bytes:
        return b'{"type":"session"}\n' + json.dumps({
            "sid": sid, "init": True, "status": "exited", "started": "2026-11-25T00:00:00Z",
            "attrs": {"release": "1.0"}}).encode() + b"\n"

    for sids in (["a"], ["a", "b"], ["b"], ["c", "c"], ["a", "b", "c"]):
        answer = httpx.post(f"{server.url}/api/{project}/envelope/", content=b"{}\n" + b"".join(map(update, sids)),
                            headers={"X-Sentry-Auth": f"Sentry sentry_key={INGEST}",
                                     "Content-Type": "application/x-sentry-envelope"})
        assert answer.status_code == 200, answer.text
    with reader(server) as client:
        eventually(lambda: stats_sessions(client, sku) >= 3)
        time.sleep(2)  # what a second count would take to land
        assert stats_sessions(client, sku) == 3


def envelope_post(server: Serve, project: object, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/api/{project}/envelope/", content=b'{}\n{"type":"client_report"}\n{}\n',
                      headers={"Content-Type": "application/x-sentry-envelope", **headers})


def test_keys_and_projects_are_checked_as_a_sentry_sdk_expects(server: Serve) -> None:
    auth = f"Sentry sentry_key={INGEST}, sentry_version=7"
    assert envelope_post(server, PROJECT, **{"X-Sentry-Auth": auth}).status_code == 200
    assert httpx.post(f"{server.url}/api/{PROJECT}/envelope/?sentry_key={INGEST}&sentry_version=7",
                      content=b"{}\n", headers={"Content-Type": "text/plain"}).status_code == 200
    assert envelope_post(server, PROJECT).status_code == 401
    assert envelope_post(server, PROJECT, **{"X-Sentry-Auth": "Sentry sentry_key=nope"}).status_code == 401
    assert envelope_post(server, PROJECT, **{"X-Sentry-Auth": f"Sentry sentry_key={READ}"}).status_code == 403
    # a title's key for another title's project: to it, no project (it cannot walk the ids)
    assert envelope_post(server, PROJECT, **{"X-Sentry-Auth": f"Sentry sentry_key={TITLE}"}).status_code == 404
    for unknown in (99, 0, "x1", 10**20):
        assert envelope_post(server, unknown, **{"X-Sentry-Auth": auth}).status_code == 404
    # a newer protocol, in the header or the query: 400 naming it, as in AWS (tests/integration/test_handlers.py)
    newer = envelope_post(server, PROJECT, **{"X-Sentry-Auth": f"Sentry sentry_key={INGEST}, sentry_version=8"})
    assert (newer.status_code, newer.json()["field"]) == (400, "X-Sentry-Auth")
    assert httpx.post(f"{server.url}/api/{PROJECT}/envelope/?sentry_key={INGEST}&sentry_version=8",
                      content=b"{}\n", headers={"Content-Type": "text/plain"}).status_code == 400


def test_gzip_and_deflate_bodies_are_read_and_a_bomb_is_refused(server: Serve) -> None:
    event = json.dumps({"event_id": "0" * 31 + "1", "message": "compressed", "platform": "native"}).encode()
    envelope = b'{"event_id":"' + b"0" * 31 + b'1"}\n{"type":"event"}\n' + event + b"\n"
    auth = {"X-Sentry-Auth": f"Sentry sentry_key={INGEST}", "Content-Type": "application/x-sentry-envelope"}
    for encoding, data in (("gzip", gzip.compress(envelope)), ("deflate", zlib.compress(envelope)),
                           ("br", brotli.compress(envelope))):
        answer = httpx.post(f"{server.url}/api/{PROJECT}/envelope/", content=data,
                            headers={**auth, "Content-Encoding": encoding})
        assert (answer.status_code, answer.json()) == (200, {"id": "0" * 31 + "1"}), answer.text
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 KB
    refused = httpx.post(f"{server.url}/api/{PROJECT}/envelope/", content=bomb,
                         headers={**auth, "Content-Encoding": "gzip"})
    assert refused.status_code == 413
    assert httpx.get(f"{server.url}/v1/health").status_code == 200
