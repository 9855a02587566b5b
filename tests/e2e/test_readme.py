"""The README, run as a newcomer would: its first command starts the server, every shell command
on the page runs against it, the keys section's server behaves as the page says, the deploy
block runs as far as it can without AWS (LEFT_OUT says what does not, and why), and the Unity and
Unreal snippets send what the contract accepts (routes, headers, body fields and their types,
posted for real)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
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
        script = script.replace("curl -sS ", "curl -sS --fail-with-body ")
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
    """Each line as a reader copies it, comment and all (found from outside: a comment after
    `make test` made the line one CI does not run)."""
    assert blocks("sh")[0].splitlines() == ["make serve", "make test"]


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    test_command = blocks("sh")[0].splitlines()[1]
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


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


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example"])
def test_open_mode_refuses_a_page_of_another_site(served: Server, origin: str) -> None:
    """Found from outside: a crash reporter's route takes a body a browser sends cross-site without
    asking (text/plain, multipart), so any page a developer visited could post to a loopback serve."""
    httpx.put(f"{served.url}/v1/projects/4242", json={"sku": "crosssite:pc"}).raise_for_status()
    envelope = b'{}\n{"type":"event"}\n{"message":"from a page"}\n'
    refused = httpx.post(f"{served.url}/api/4242/envelope/", content=envelope,
                         headers={"Content-Type": "text/plain", "Origin": origin})
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    local = httpx.post(f"{served.url}/api/4242/envelope/", content=envelope,
                       headers={"Content-Type": "text/plain", "Origin": "http://localhost:3000"})
    assert local.status_code == 200  # a page of this machine's, a game's web build under development


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
    fields: dict[str, str]  # each field the snippet writes, and the JSON type it writes it as


CSHARP_TYPES = {"string": "string", "long": "integer", "int": "integer"}
CPP_TYPES = {"FString": "string", "int64": "integer", "int32": "integer"}


def unity_requests(code: str) -> list[Request]:
    classes = {
        name: {field.strip(): CSHARP_TYPES[kind]
               for kind, names in re.findall(r"public (\w+) ([^;]+);", body) for field in names.split(",")}
        for name, body in re.findall(r"class (\w+) \{ (public [^}]+)\}", code)
    }
    requests = []
    for path, variable in re.findall(r'Post\("(/v1/[\w-]+)", JsonUtility\.ToJson\((\w+)\)\)', code):
        kind = re.search(rf"\((\w+) {variable}\)", code)
        assert kind, variable
        requests.append(Request(path, classes[kind.group(1)]))
    return requests


def unreal_requests(code: str) -> list[Request]:
    requests = []
    for parameters, body in re.findall(r"^void \w+\((.*?)\)\n\{\n(.*?)^\}", code, re.S | re.M):
        path = re.search(r'BlackboxPost\(TEXT\("(/v1/[\w-]+)"\)', body)
        assert path, body
        types = {name: CPP_TYPES[kind] for kind, name in re.findall(r"(\w+)&? (\w+)(?:,|$)", parameters)}
        fields = {field: "string" if value == "TEXT(" else types[value]
                  for field, value in re.findall(r'WriteValue\(TEXT\("(\w+)"\), (TEXT\(|\w+)', body)}
        requests.append(Request(path.group(1), fields))
    return requests


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its $ref followed, and of a choice (anyOf), the one event rather than the batch,
    a value rather than null."""
    if "$ref" in schema:
        resolved: dict[str, Any] = CONTRACT
        for part in schema["$ref"].removeprefix("#/").split("/"):
            resolved = resolved[part]
        return resolve(resolved)
    if "anyOf" in schema:
        return resolve(next(s for s in schema["anyOf"] if s.get("type") not in ("array", "null")))
    return schema


def body_schema(path: str) -> dict[str, Any]:
    """The object one event is, in the contract's request body for POST `path`."""
    return resolve(CONTRACT["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"])


SAMPLES = {"sku": "skyrift:pc", "board": "time-trial", "kind": "client", "playerId": "p-7", "score": 42,
           "buildVersion": "1.4.2", "status": "crashed"}
# every event a game sends: crashes from clients, sessions from both, scores from dedicated servers
GAME_ROUTES = {"/v1/crashes", "/v1/sessions", "/v1/scores"}


@pytest.mark.parametrize("engine", ["csharp", "cpp"])
def test_game_snippets_send_what_the_contract_takes(served: Server, engine: str) -> None:
    code = blocks(engine)[0]
    requests = unity_requests(code) if engine == "csharp" else unreal_requests(code)
    assert sorted(r.path for r in requests) == sorted(GAME_ROUTES)
    # one sender sets the headers on every request: each route is sent with an Idempotency-Key
    senders = re.findall(r"new UnityWebRequest\(|CreateRequest\(\)", code)
    headers = set(re.findall(r'SetRequestHeader\("([^"]+)"', code) + re.findall(r'SetHeader\(TEXT\("([^"]+)"\)', code))
    assert len(senders) == 1 and headers == {"Content-Type", "Idempotency-Key", "x-api-key"}
    assert CONTRACT["components"]["securitySchemes"]["apiKey"]["name"] == "x-api-key"
    for path in GAME_ROUTES:
        assert "Idempotency-Key" in {p["name"] for p in CONTRACT["paths"][path]["post"]["parameters"]}
    # the snippets back off on what the contract says to retry, and honour its Retry-After
    assert all(str(status) in code for status in (408, 429)) and "Retry-After" in code
    for request in requests:
        assert ("POST", request.path) in {(r.method, r.path) for r in API_ROUTES}
        schema = body_schema(request.path)
        properties = {name: resolve(s).get("type") for name, s in schema["properties"].items()}
        assert {f: properties.get(f) for f in request.fields} == request.fields, request
        assert set(schema.get("required", ())) <= set(request.fields), request
        body = {f: SAMPLES.get(f, f"sample {f}" if kind == "string" else 1) for f, kind in request.fields.items()}
        key = {"Idempotency-Key": f"{engine}-{request.path}"}
        answer = httpx.post(f"{served.url}{request.path}", json=body, headers=key)
        assert answer.status_code == 202, (request, answer.text)


# The page's shell lines no test runs as written, and why; what of them can run here does run
# (test_the_deploy_block_names_what_there_is), and a line in neither fails the test below.
LEFT_OUT = {
    "make test": "the whole suite, this test among it",
    "npx cdk bootstrap": "needs an AWS account; its region is checked against cdk.json, its options against cdk",
    "npx cdk deploy": "needs an AWS account and 30-45 minutes; its context is checked against cdk.json, its options "
                      "against cdk",
}


def deploy_blocks() -> list[str]:
    return [block for block in blocks("sh") if "npx cdk deploy" in block]


def commands(block: str) -> list[str]:
    """A block's lines, comments dropped (blocks of one command a line)."""
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_every_shell_block_is_run_or_left_out_for_a_reason() -> None:
    for block in blocks("sh"):
        # run whole by the tests above: the curls, the keys section; the deploy block as far as it can
        if "curl " in block or "BLACKBOX_API_KEYS__" in block or block in deploy_blocks():
            continue
        for command in commands(block):
            assert command == "make serve" or command.startswith(tuple(LEFT_OUT)), command  # `served` runs the first


def test_the_deploy_block_names_what_there_is(served: Server) -> None:
    """Deploying needs an AWS account: of the block, its environment line runs, `blackbox smoke`
    runs against the local server (as it can against a deployment), and the cdk commands' options,
    context and region are checked against cdk --help and cdk.json."""
    [block] = deploy_blocks()
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    env = dict(os.environ)
    for command in commands(block):
        if command.startswith("export "):  # for the lines after it, as in a shell
            name, value = command.removeprefix("export ").split("=", 1)
            env[name] = value
        elif command.startswith("npx cdk "):
            subcommand = command.split()[2]
            assert command.startswith(tuple(LEFT_OUT)), command
            help_text = subprocess.run(["npx", "--no-install", "cdk", subcommand, "--help"], cwd=ROOT, env=env,
                                       capture_output=True, text=True, timeout=120, check=True).stdout
            for option in re.findall(r" (--?[a-z][\w-]*)", command):
                assert re.search(rf"(^|[\s,]){option}\b", help_text, re.M), (command, option)
            for name, value in re.findall(r"-c (\w+)=(\S+)", command):
                assert name == "env" and value in context["environments"], command
            for account, region in re.findall(r"aws://([^/\s]+)/([\w-]+)", command):
                assert account == "<account>" and region == context["environments"][context["env"]]["region"]
        else:  # the smoke, with the local server's URL; it has no keys, so any key does
            variables = {"URL": served.url, "INGEST": "a-key", "SERVER": "a-server-key"}
            smoke = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=ROOT, env=env | variables,
                                   capture_output=True, text=True, timeout=120, check=False)
            assert re.match(r"(\w+=\S+ )*\.venv/bin/blackbox smoke ", command) and smoke.returncode == 0, smoke.stderr


# what the Unreal snippet uses beyond CoreMinimal.h, and the header that declares it (Unreal's API
# reference); FHttpResponsePtr's methods are called, so IHttpResponse must be complete
UNREAL_HEADERS = {
    "FTSTicker": "Containers/Ticker.h",
    "FHttpModule": "HttpModule.h",
    "IHttpRequest": "Interfaces/IHttpRequest.h",
    "FHttpResponsePtr": "Interfaces/IHttpResponse.h",
    "TCondensedJsonPrintPolicy": "Policies/CondensedJsonPrintPolicy.h",
    "TJsonWriter": "Serialization/JsonWriter.h",
}


def test_the_unreal_snippet_includes_what_it_uses() -> None:
    code = blocks("cpp")[0]
    included = set(re.findall(r'^#include "([^"]+)"', code, re.M))
    for name, header in UNREAL_HEADERS.items():
        assert not re.search(rf"\b{name}\b", code) or header in included, name


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)  # code is not links: C++ lambdas
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", prose):
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"


def test_the_api_docs_python_sentry_snippet_lands_a_report(served: Server) -> None:
    [snippet] = [block for block in blocks("python", API_DOCS) if "sentry_sdk" in block]
    httpx.put(f"{served.url}/v1/projects/4343", json={"sku": "pysdk:pc"}).raise_for_status()
    script = snippet.replace("localhost:8080/42", f"localhost:{served.port}/4343")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and re.fullmatch(r"[0-9a-f]{32}\n", result.stdout), result.stderr
    deadline = time.monotonic() + 30
    while not (reports := httpx.get(f"{served.url}/v1/crashes", params={"sku": "pysdk:pc", "fields": "full"}).json()
               ["reports"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    [report] = reports
    assert (report["crashType"], report["buildVersion"]) == ("ZeroDivisionError", "skyrift@1.4.3")
    assert report["payload"]["sentryEvent"]["event_id"] == result.stdout.strip()
