"""Minidump processing through `blackbox serve` on both profiles, with real minidumps of a real
crashing program and its real symbols (tests/fixtures/minidumps): uploaded as Crashpad sends them,
each report is walked (pending → processed); without symbols its frames are module + offset and
two crashes of one bug fall apart; the symbol file's upload walks them again, their frames name the
program's functions and the two share one group. A dump that is not one fails with its reason and
holds nothing else back."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from local_runtime.process import Serve
from tests.e2e.conftest import put_project, running
from tests.unit.test_breakpad_uploads import DUMPS, crashpad

INGEST, SERVER, READ = "ingest-Md4k", "server-Mq8z", "read-Mr2x"
KEYS = {"BLACKBOX_API_KEYS__INGEST": json.dumps([INGEST]), "BLACKBOX_API_KEYS__SERVER": json.dumps([SERVER]),
        "BLACKBOX_API_KEYS__READ": json.dumps([READ])}
PROJECT, SKU = 11, "emberfall:linux"
[SYMBOL_FILE] = DUMPS.glob("*/*/*.sym")
PROGRAM = SYMBOL_FILE.parent.parent.name
DEBUG_ID = SYMBOL_FILE.parent.name
BUG_1 = ["blackbox_crasher::parse_level_header", "blackbox_crasher::load_level", "blackbox_crasher::run"]


@pytest.fixture(scope="module", params=["embedded", "services"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(request.param, tmp_path_factory.mktemp(f"walks-{request.param}"), KEYS) as serve:
        put_project(serve, PROJECT, SKU, SERVER)
        yield serve


def upload(server: Serve, dump: bytes, version: str) -> None:
    body, content_type = crashpad({"ver": version, "plat": "Linux"}, {"upload_file_minidump": ("crash.dmp", dump)})
    answer = httpx.post(f"{server.url}/api/{PROJECT}/minidump/?sentry_key={INGEST}", content=body,
                        headers={"Content-Type": content_type})
    assert answer.status_code == 200, answer.text


def report_of(server: Serve, version: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The full report of this build once `done` holds for it (60 s at most)."""
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=server.url, headers={"x-api-key": READ}, timeout=30) as client:
        while True:
            found = client.get("/v1/crashes", params={"sku": SKU, "fields": "full", "buildVersion": version}).json()
            if (found["reports"] and done(found["reports"][0])) or time.monotonic() > deadline:
                [report] = found["reports"]
                assert done(report), report.get("processed")
                return report


def walked(report: dict[str, Any]) -> bool:
    """Walked, and its index row updated too (its walk's document is written first)."""
    walk = report.get("processed")
    return report["processing"] in ("processed", "failed") and walk is not None and (
        walk["signature"] is None or walk["signature"] == report["signature"])


def functions(report: dict[str, Any]) -> list[str | None]:
    return [frame["function"] for frame in report["processed"]["frames"][:3]]


def test_walks_without_then_with_symbols_name_the_functions_and_join_the_group(server: Serve) -> None:
    for version, dump in (("1.0-magic", "level-magic"), ("1.0-version", "level-version"), ("1.0-patch", "patch")):
        upload(server, (DUMPS / f"{dump}.dmp").read_bytes(), version)
    magic, version = report_of(server, "1.0-magic", walked), report_of(server, "1.0-version", walked)
    for report in (magic, version):
        processed = report["processed"]
        assert (report["processing"], report["crashType"]) == ("processed", "SIGSEGV / SEGV_MAPERR")
        assert functions(report) == [None, None, None]
        assert processed["frames"][0]["module"] == PROGRAM
        assert f"{PROGRAM}/{DEBUG_ID}/{PROGRAM}.sym" in processed["missingSymbols"]
    # two instructions of one function, unnamed: apart
    assert magic["signature"] != version["signature"]

    sym = SYMBOL_FILE.read_bytes()
    stored = httpx.post(f"{server.url}/v1/symbols", content=gzip.compress(sym), headers={
        "x-api-key": SERVER, "Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
    assert stored.status_code == 201, stored.text
    assert (stored.json()["path"], stored.json()["sizeBytes"]) == (f"{PROGRAM}/{DEBUG_ID}/{PROGRAM}.sym", len(sym))

    named = lambda report: walked(report) and functions(report)[0] is not None  # noqa: E731
    magic, version = report_of(server, "1.0-magic", named), report_of(server, "1.0-version", named)
    patch = report_of(server, "1.0-patch", named)
    assert functions(magic) == functions(version) == BUG_1
    assert magic["processed"]["stackTrace"].splitlines()[0].startswith(
        "blackbox_crasher::parse_level_header (src/main.rs:")
    assert magic["signature"] == version["signature"] != patch["signature"]
    assert patch["crashType"].startswith("SIGILL")
    assert f"{PROGRAM}/{DEBUG_ID}/{PROGRAM}.sym" not in magic["processed"]["missingSymbols"]
    groups = httpx.get(f"{server.url}/v1/crash-groups", params={"sku": SKU}, headers={"x-api-key": READ}).json()
    sizes = {group["signature"]: group["count"] for group in groups["groups"]}
    assert sizes[magic["signature"]] == 2


def test_bytes_that_are_no_minidump_fail_with_a_reason_and_hold_nothing_back(server: Serve) -> None:
    upload(server, b"MDMP\x93\xa7" + bytes(range(256)) * 8, "2.0-garbage")
    upload(server, (DUMPS / "patch.dmp").read_bytes(), "2.0-good")
    failed = report_of(server, "2.0-garbage", walked)
    assert failed["processing"] == "failed"
    assert failed["processed"]["reason"]
    assert failed["crashType"] == "minidump"  # nothing named it
    assert report_of(server, "2.0-good", walked)["processing"] == "processed"


def test_symbol_files_are_listed_and_deleted_with_a_server_key(server: Serve) -> None:
    sym = SYMBOL_FILE.read_bytes()
    headers = {"Content-Type": "application/octet-stream"}
    assert httpx.post(f"{server.url}/v1/symbols", content=sym, headers={**headers, "x-api-key": READ}).status_code \
        == 403
    again = httpx.post(f"{server.url}/v1/symbols", content=sym, headers={**headers, "x-api-key": SERVER})
    assert again.status_code in (200, 201), again.text
    listed = httpx.get(f"{server.url}/v1/symbols", headers={"x-api-key": READ}).json()
    assert [f["path"] for f in listed["symbols"]] == [f"{PROGRAM}/{DEBUG_ID}/{PROGRAM}.sym"]
    refused = httpx.post(f"{server.url}/v1/symbols", content=b"not a symbol file\n",
                         headers={**headers, "x-api-key": SERVER})
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_field"), refused.text
    as_text = httpx.post(f"{server.url}/v1/symbols", content=sym, headers={"Content-Type": "text/plain",
                                                                            "x-api-key": SERVER})
    assert as_text.status_code == 415
    path = f"{server.url}/v1/symbols/{PROGRAM}/{DEBUG_ID}"
    assert httpx.delete(path, headers={"x-api-key": READ}).status_code == 403
    assert httpx.delete(path, headers={"x-api-key": SERVER}).status_code == 204
    assert httpx.delete(path, headers={"x-api-key": SERVER}).status_code == 404
    assert httpx.get(f"{server.url}/v1/symbols", headers={"x-api-key": READ}).json()["symbols"] == []
