"""Through `blackbox serve` with keys: a title's key posts only its own skus (the local gateway
names the key to capture as API Gateway does), and `blackbox smoke`, the post-deploy check, passes
against it and fails in one line with a wrong key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local_runtime.process import Serve
from local_runtime.smoke import Smoke, SmokeConfig

TITLE_KEY, PLAIN_KEY, SERVER_KEY, READ_KEY = "title-Sk7q", "ingest-Pl4n", "server-Qz07", "read-Lm55"
KEYS = {
    "BLACKBOX_API_KEYS__INGEST": json.dumps([PLAIN_KEY, {"key": TITLE_KEY, "skus": ["skyrift:pc", "skyrift:ps5"]}]),
    "BLACKBOX_API_KEYS__SERVER": json.dumps([SERVER_KEY]),
    "BLACKBOX_API_KEYS__READ": json.dumps([READ_KEY]),
}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    base = tmp_path_factory.mktemp("title-keys")
    server = Serve(base / "data", base / "serve.log", env=KEYS)
    server.start()
    yield server
    assert server.stop() == 0


def post(server: Serve, path: str, body: object, key: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, headers={"x-api-key": key}, timeout=30)


def test_a_title_key_posts_its_own_skus_only(keyed: Serve):
    assert post(keyed, "/v1/crashes", {"sku": "skyrift:ps5"}, TITLE_KEY).status_code == 202
    refused = post(keyed, "/v1/crashes", {"sku": "ember:pc"}, TITLE_KEY)
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert "ember:pc" in refused.json()["message"]
    mixed = [{"sku": "skyrift:pc", "kind": "client"}, {"sku": "ember:pc", "kind": "client"}]
    assert post(keyed, "/v1/sessions", mixed, TITLE_KEY).status_code == 403
    assert post(keyed, "/v1/sessions", mixed[:1], TITLE_KEY).status_code == 202
    # the other keys are no title's: any sku
    assert post(keyed, "/v1/crashes", {"sku": "ember:pc"}, PLAIN_KEY).status_code == 202
    assert post(keyed, "/v1/sessions", mixed, SERVER_KEY).status_code == 202
    # of the two ember:pc crashes, only the plain key's became a report
    deadline = time.monotonic() + 10
    while not (reports := ember_reports(keyed)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(reports) == 1


def ember_reports(server: Serve) -> list[dict]:
    listed = httpx.get(f"{server.url}/v1/crashes", params={"sku": "ember:pc"}, headers={"x-api-key": READ_KEY})
    reports: list[dict] = listed.json()["reports"]
    return reports


def smoke(server: Serve, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "smoke", "--url", server.url, *options],
                          capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("options", [
    ["--key", PLAIN_KEY],  # a sku of the run's own: the session count is exact
    ["--key", TITLE_KEY, "--sku", "skyrift:pc"],
], ids=["shared-key", "title-key"])
def test_smoke_passes_against_serve(keyed: Serve, options: list[str]):
    result = smoke(keyed, *options, "--server-key", SERVER_KEY, "--read-key", READ_KEY, "--timeout", "30")
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[0] for line in lines] == ["ok"] * 8
    checks = " ".join(lines)
    for check in ("health", "retry crash", "crash readable", "sessions counted", "score ranked"):
        assert check in checks
    assert "payload and attachment as sent" in checks


def test_smoke_takes_its_keys_from_the_environment(keyed: Serve):
    """Found from outside: keys only on the command line, which every user of the machine reads in
    `ps`, where the README had them passed right after a deploy."""
    keys = {"BLACKBOX_KEY": PLAIN_KEY, "BLACKBOX_SERVER_KEY": SERVER_KEY, "BLACKBOX_READ_KEY": READ_KEY}
    result = smoke(keyed, "--timeout", "30", env=keys)
    assert result.returncode == 0, result.stdout + result.stderr
    # the command line's, where both are given
    result = smoke(keyed, "--key", "not-a-key", env=keys)
    assert result.returncode == 1 and "POST /v1/crashes answered 401" in result.stdout


@pytest.mark.parametrize(("options", "said"), [
    (["--key", "not-a-key"], "POST /v1/crashes answered 401 (unauthorized"),
    (["--key", TITLE_KEY, "--sku", "ember:pc"], "POST /v1/crashes answered 403 (forbidden"),
    (["--key", PLAIN_KEY], "POST /v1/scores answered 403 (forbidden"),  # an ingest key may not post scores
])
def test_smoke_fails_in_one_line(keyed: Serve, options: list[str], said: str):
    result = smoke(keyed, *options, "--read-key", READ_KEY)
    assert result.returncode == 1 and result.stderr == ""
    *passed, failed = result.stdout.splitlines()
    assert all(line.startswith("ok") for line in passed)
    assert failed.startswith("FAIL") and said in failed


def test_smoke_says_when_nothing_listens(tmp_path: Path):
    result = smoke(Serve(tmp_path, tmp_path / "log"), "--key", "k")  # a free port nobody serves
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line.startswith("FAIL  health") and "connect" in line.lower()


def test_smoke_needs_no_key_for_a_serve_without_keys_and_refuses_a_url_without_its_scheme(tmp_path: Path):
    """Found by a newcomer: a serve without keys needed a --key all the same (any), and a URL
    without http:// failed its health check as if nothing answered, where load refuses it."""
    result = subprocess.run([sys.executable, "-m", "cli.main", "smoke", "--url", "127.0.0.1:9411"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "is not an http:// or https:// URL, e.g. http://127.0.0.1:9411" in result.stderr
    server = Serve(tmp_path / "data", tmp_path / "serve.log")
    server.start()
    try:
        result = smoke(server, "--timeout", "30")
        assert result.returncode == 0, result.stdout + result.stderr
        assert [line.split()[0] for line in result.stdout.splitlines()] == ["ok"] * 8
    finally:
        assert server.stop() == 0


def test_smoke_asks_for_an_attachment_as_bytes(keyed: Serve):
    """Found in review: API Gateway answers a binary body as base64 text unless the request's Accept
    names a binary media type of the API's; smoke's attachment read sent httpx's `*/*`, so in AWS the
    attachment was "not the one sent"."""
    sent: dict[str, str] = {}

    def record(request: httpx.Request) -> None:
        sent[request.url.path] = request.headers.get("accept", "")

    config = SmokeConfig(url=keyed.url, key=PLAIN_KEY, server_key=SERVER_KEY, read_key=READ_KEY, timeout_s=30)
    with httpx.Client(timeout=30, event_hooks={"request": [record]}) as client:
        for _, check in Smoke(config, client).checks():
            check()
    [accept] = [value for path, value in sent.items() if "/attachments/" in path]
    assert accept == "application/octet-stream"
