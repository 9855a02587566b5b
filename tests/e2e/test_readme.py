"""The README, run as a newcomer would: its first command starts the server, every shell command
on the page runs against it, the keys section's server behaves as the page says, and the Unity
and Unreal snippets send what the contract accepts (routes, headers, body fields, posted for
real)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lambdas.functions import API_ROUTES
from local_runtime.process import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
API_DOCS = (ROOT / "docs" / "api.md").read_text()
CONTRACT: dict[str, Any] = yaml.safe_load((ROOT / "api" / "openapi.yaml").read_text())
LAN_HOST = "192.168.1.20:8080"  # a console devkit's view of the machine


def blocks(language: str, page: str = README) -> list[str]:
    return [body for lang, body in re.findall(r"^```(\w+)\n(.*?)^```", page, re.S | re.M) if lang == language]


def run_curls(page: str, server: Server) -> None:
    curls = [block for block in blocks("sh", page) if "curl " in block]
    assert len(curls) >= 2
    for block in curls:
        # --fail-with-body: an error status fails the block, and its body says why
        script = block.replace("localhost:8080", f"localhost:{server.port}")
        script = script.replace("curl -s ", "curl -sS --fail-with-body ")
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=60)


def start(command: str, base: Path, env: dict[str, str] | None = None) -> Server:
    """`command` (a README line, given a free port) in bash, from the repository root, on a
    fresh data directory; healthy within 30 s."""
    port = free_port()
    log = base / "serve.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_API_KEYS")}
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", command.replace("make serve", f"make serve PORT={port}")],
        cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        env=clean | {"BLACKBOX_DATA_DIR": str(base / "data")} | (env or {}),
    )
    server = Server(port, process, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(f"{server.url}/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.stop()
    raise AssertionError(f"{command!r} was not healthy in 30 s: {log.read_text()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The README's first block: `make serve` (the venv exists already, so it starts at once)."""
    first = blocks("sh")[0]
    serve = next(line.split("#")[0].strip() for line in first.splitlines() if line.startswith("make serve"))
    server = start(serve, tmp_path_factory.mktemp("readme"))
    yield server
    server.stop()


def test_readme_opens_with_the_two_commands() -> None:
    commands = [line.split("#")[0].strip() for line in blocks("sh")[0].splitlines()]
    assert commands == ["make serve", "make test"]


def test_serve_announces_the_dashboard(served: Server) -> None:
    assert f"http://127.0.0.1:{served.port}/" in served.log.read_text()
    page = httpx.get(f"{served.url}/")
    assert page.status_code == 200 and "<title>Blackbox</title>" in page.text


def test_every_curl_on_the_page_and_in_the_api_docs_succeeds(served: Server) -> None:
    run_curls(README, served)
    # what the page promised is there: the report, newest first, and the player's rank
    with httpx.Client(base_url=served.url) as client:
        reports = client.get("/v1/crashes", params={"sku": "skyrift:pc", "order": "desc"}).json()["reports"]
        assert [r["crashType"] for r in reports] == ["ACCESS_VIOLATION"]
        assert client.get("/v1/leaderboards/time-trial/players/p-1029").json()["rank"] == 1
    # the API page goes on from there (its report 1 and log.txt are the README's first crash)
    run_curls(API_DOCS, served)


def test_open_mode_refuses_other_hosts_as_the_page_says(served: Server) -> None:
    response = httpx.get(f"{served.url}/v1/crashes", params={"sku": "skyrift:pc"}, headers={"Host": LAN_HOST})
    assert response.status_code == 403 and response.json()["error"] == "forbidden"


def test_the_keys_section_serves_the_lan_with_roles(tmp_path: Path) -> None:
    block = next(block for block in blocks("sh") if "BLACKBOX_API_KEYS__" in block)
    keys = dict(re.findall(r"BLACKBOX_API_KEYS__(\w+)='\[\"([^\"]+)\"\]'", block))
    assert set(keys) == {"INGEST", "SERVER", "READ"}
    server = start(block, tmp_path)
    try:
        with httpx.Client(base_url=server.url, headers={"Host": LAN_HOST}) as client:
            crash = {"sku": "skyrift:pc", "crashType": "X"}
            assert client.post("/v1/crashes", json=crash).status_code == 401
            assert client.post("/v1/crashes", json=crash, headers={"x-api-key": keys["INGEST"]}).status_code == 202
            score = {"board": "b", "playerId": "p", "score": 1}
            assert client.post("/v1/scores", json=score, headers={"x-api-key": keys["INGEST"]}).status_code == 403
            assert client.post("/v1/scores", json=score, headers={"x-api-key": keys["SERVER"]}).status_code == 202
            query = {"sku": "skyrift:pc"}
            assert client.get("/v1/crashes", params=query, headers={"x-api-key": keys["INGEST"]}).status_code == 403
            assert client.get("/v1/crashes", params=query, headers={"x-api-key": keys["READ"]}).status_code == 200
    finally:
        server.stop()


@dataclass(frozen=True)
class Request:
    path: str
    fields: frozenset[str]


def unity_requests(code: str) -> list[Request]:
    classes = {name: frozenset(f.strip() for f in fields.split(","))
               for name, fields in re.findall(r"class (\w+) \{ public string ([^;]+); \}", code)}
    requests = []
    for path, variable in re.findall(r'Post\("(/v1/[\w-]+)", JsonUtility\.ToJson\((\w+)\)\)', code):
        kind = re.search(rf"\((\w+) {variable}\)", code)
        assert kind, variable
        requests.append(Request(path, classes[kind.group(1)]))
    return requests


def unreal_requests(code: str) -> list[Request]:
    requests = []
    for body in re.findall(r"^void \w+\(.*?\)\n\{\n(.*?)^\}", code, re.S | re.M):
        path = re.search(r'BlackboxPost\(TEXT\("(/v1/[\w-]+)"\)', body)
        assert path, body
        requests.append(Request(path.group(1), frozenset(re.findall(r'WriteValue\(TEXT\("(\w+)"\)', body))))
    return requests


def body_schema(path: str) -> dict[str, Any]:
    """The object one event is, in the contract's request body for POST `path`."""
    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in schema:
            resolved: dict[str, Any] = CONTRACT
            for part in schema["$ref"].removeprefix("#/").split("/"):
                resolved = resolved[part]
            return resolve(resolved)
        if "oneOf" in schema:  # one event or a batch of them
            return resolve(next(s for s in schema["oneOf"] if s.get("type") != "array"))
        return schema
    return resolve(CONTRACT["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"])


SAMPLES = {"sku": "skyrift:pc", "board": "time-trial", "kind": "client", "playerId": "p-7", "score": 42}


@pytest.mark.parametrize("engine", ["csharp", "cpp"])
def test_game_snippets_send_what_the_contract_takes(served: Server, engine: str) -> None:
    code = blocks(engine)[0]
    requests = unity_requests(code) if engine == "csharp" else unreal_requests(code)
    assert {r.path for r in requests} >= {"/v1/crashes"}
    headers = set(re.findall(r'SetRequestHeader\("([^"]+)"', code) + re.findall(r'SetHeader\(TEXT\("([^"]+)"\)', code))
    assert headers == {"Content-Type", "Idempotency-Key", "x-api-key"}
    assert CONTRACT["components"]["securitySchemes"]["apiKey"]["name"] == "x-api-key"
    assert CONTRACT["components"]["parameters"]["IdempotencyKey"]["name"] == "Idempotency-Key"
    # the snippets back off on what the contract says to retry, and honour its Retry-After
    assert all(str(status) in code for status in (408, 429)) and "Retry-After" in code
    for request in requests:
        assert ("POST", request.path) in {(m, p) for m, p, _ in API_ROUTES}
        schema = body_schema(request.path)
        assert request.fields <= set(schema["properties"]), request
        assert set(schema.get("required", ())) <= request.fields, request
        body = {f: SAMPLES.get(f, f"sample {f}") for f in request.fields}
        key = {"Idempotency-Key": f"{engine}-{request.path}"}
        answer = httpx.post(f"{served.url}{request.path}", json=body, headers=key)
        assert answer.status_code == 202, (request, answer.text)


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # code is not links: C++ lambdas
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", prose):
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"
