"""Crashpad's, Breakpad's and Unreal CrashReportClient's uploads, byte for byte as those clients
send them (tests/unit builds them), through `blackbox serve` with keys on both profiles: each lands
as one report of its project's sku with every file byte-exact, answered as its client expects; a
retry is the same report; bad keys and projects are refused."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from local_runtime.process import Serve
from tests.e2e.conftest import put_project, running
from tests.unit.test_breakpad_uploads import DUMP, LOG, REPORT_UUID, breakpad_windows, crashpad_report
from tests.unit.test_unreal_crashes import FILES as UNREAL_FILES
from tests.unit.test_unreal_crashes import upload as unreal_upload

INGEST, SERVER, READ = "ingest-Nt7v", "server-Nv3q", "read-Nr5w"
KEYS = {"BLACKBOX_API_KEYS__INGEST": json.dumps([INGEST]), "BLACKBOX_API_KEYS__SERVER": json.dumps([SERVER]),
        "BLACKBOX_API_KEYS__READ": json.dumps([READ])}
PROJECT, SKU = 7, "skyrift:win64"


@pytest.fixture(scope="module", params=["embedded", "services"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(request.param, tmp_path_factory.mktemp(f"native-{request.param}"), KEYS) as serve:
        put_project(serve, PROJECT, SKU, SERVER)
        yield serve


def reports(server: Serve, expected: int, **filters: str) -> list[dict[str, Any]]:
    """The sku's full reports once `expected` of them (matching `filters`) are readable."""
    with httpx.Client(base_url=server.url, headers={"x-api-key": READ}, timeout=30) as client:
        deadline = time.monotonic() + 60
        while True:
            found: list[dict[str, Any]] = client.get("/v1/crashes", params={
                "sku": SKU, "fields": "full", "limit": 1000, **filters}).json()["reports"]
            if len(found) >= expected or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


def attachment(server: Serve, report: dict[str, Any], name: str) -> bytes:
    answer = httpx.get(f"{server.url}/v1/crashes/{report['reportId']}/attachments/{name}",
                       headers={"x-api-key": READ})
    assert answer.status_code == 200, answer.text
    return answer.content


def test_a_gzipped_crashpad_upload_is_one_report_and_its_retry_the_same(server: Serve) -> None:
    body, content_type = crashpad_report(prod="Skyrift", ver="1.4.2", plat="Win64")
    sent = gzip.compress(body)
    for _ in range(2):  # Crashpad sends the same report file again when it heard no answer
        answer = httpx.post(f"{server.url}/api/{PROJECT}/minidump/?sentry_key={INGEST}", content=sent,
                            headers={"Content-Type": content_type, "Content-Encoding": "gzip"})
        assert (answer.status_code, answer.text) == (200, REPORT_UUID.replace("-", "")), answer.text
        assert answer.headers["content-type"].startswith("text/plain")
    [report] = reports(server, 1, buildVersion="1.4.2")
    # its crashType is the walk's once processed (tests/e2e/test_minidump_processing.py)
    assert report["platform"] == "Win64"
    assert attachment(server, report, f"{REPORT_UUID}.dmp") == DUMP
    assert attachment(server, report, "game.log") == LOG


def test_a_breakpad_client_posts_to_socorros_submit(server: Serve) -> None:
    parameters = {"ProductName": "Skyrift", "Version": "2.0.0", "BuildID": "20261124051500"}
    body, content_type = breakpad_windows(parameters, r"C:\Users\ana\AppData\Local\CrashDumps\crash 1.dmp", DUMP)
    answer = httpx.post(f"{server.url}/submit?project={PROJECT}&sentry_key={INGEST}", content=body,
                        headers={"Content-Type": content_type})
    assert answer.status_code == 200 and answer.text.startswith("CrashID=bp-"), answer.text
    [report] = reports(server, 1, buildVersion="2.0.0")
    assert report["payload"]["productName"] == "Skyrift"
    assert attachment(server, report, "crash 1.dmp") == DUMP
    # found from outside: a project given twice was read as its last, where a proxy may read the first
    for query in (f"sentry_key={INGEST}", f"project=99&sentry_key={INGEST}",
                  f"project=99&project={PROJECT}&sentry_key={INGEST}"):
        refused = httpx.post(f"{server.url}/submit?{query}", content=body, headers={"Content-Type": content_type})
        assert (refused.status_code, refused.json()["field"]) == (400, "project")
        # found by a newcomer: an upload naming none was not told where a project goes
        assert "?project=" in refused.json()["message"] or "project=99" in query
    assert httpx.post(f"{server.url}/submit?project={PROJECT}", content=body,
                      headers={"Content-Type": content_type}).status_code == 401


def test_an_unreal_crash_report_client_upload_keeps_every_file(server: Serve) -> None:
    sent = unreal_upload()
    answer = httpx.post(f"{server.url}/api/{PROJECT}/unreal/{INGEST}/", content=sent,
                        headers={"Content-Type": "application/octet-stream"})
    assert answer.status_code == 200, answer.text
    [report] = reports(server, 1, platform="Windows")
    # found by a newcomer: the id answered was one the report nowhere holds; now its eventId
    assert answer.text == report["eventId"]
    assert report["buildVersion"] == "++UE5+Release-5.3-CL-29314046"
    for name, data in UNREAL_FILES:
        assert attachment(server, report, name) == data
    assert httpx.post(f"{server.url}/api/{PROJECT}/unreal/not-a-key/", content=sent,
                      headers={"Content-Type": "application/octet-stream"}).status_code == 401
    assert httpx.post(f"{server.url}/api/{PROJECT}/unreal/{READ}/", content=sent,
                      headers={"Content-Type": "application/octet-stream"}).status_code == 403
