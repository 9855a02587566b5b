"""Each key can do exactly what its role allows, through `blackbox serve`: an ingest key posts
crashes and sessions; a server key also posts scores and sets up boards; a read key reads; health
and the dashboard's files are open. Keys never reach the log. Without keys serve keeps to loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from api.access import Role
from lambdas.functions import API_ROUTES, ApiRoute
from local_runtime.process import Serve

KEYS = {Role.INGEST: "ingest-Kx81", Role.SERVER: "server-Qz07", Role.READ: "read-Lm55"}
# a request per route that the handler accepts once it is let through
BODIES = {
    "/v1/crashes": {"sku": "roles:pc"},
    "/v1/sessions": {"sku": "roles:pc", "kind": "client"},
    "/v1/scores": {"board": "roles", "playerId": "p1", "score": 5},
    "/v1/leaderboards/{board}": {"order": "desc", "operator": "best"},
    "/v1/leaderboards/{board}/attempts": {"playerId": "p1", "score": 5},
    "/v1/projects/{projectId}": {"sku": "roles:pc"},
    "/v1/crash-groups/{signature}/state": {"state": "unresolved"},
    "/v1/crash-groups/{signature}/merge": {"into": "1" * 16},
    "/v1/crash-groups:rules": {"skip": ["in std::*"]},
    "/v1/webhooks/{name}": {"url": "https://hooks.example.com/roles", "secret": "roles-secret-0123",
                            "alerts": ["regressed"]},
}
PARAMS = {"/v1/crashes": {"sku": "roles:pc"}, "/v1/stats": {"sku": "roles:pc"},
          "/v1/crash-groups": {"sku": "roles:pc"}, "/v1/alerts": {"sku": "roles:pc"},
          "/v1/alerts/history": {"sku": "roles:pc"},
          "/v1/leaderboards/{board}/rank": {"score": "1"}, "/v1/releases": {"sku": "roles:pc"},
          "/v1/releases/{build}": {"sku": "roles:pc"}, "/v1/crash-groups/{signature}": {"sku": "roles:pc"},
          "/v1/crash-groups/{signature}/state": {"sku": "roles:pc"},
          "/v1/crash-groups/{signature}/merge": {"sku": "roles:pc"}, "/v1/crash-groups:rules": {"sku": "roles:pc"},
          "/v1/crash-groups:reprocess": {"sku": "roles:pc"}}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    base = tmp_path_factory.mktemp("roles")
    env = {f"BLACKBOX_API_KEYS__{role.value.upper()}": json.dumps([key]) for role, key in KEYS.items()}
    server = Serve(base / "data", base / "serve.log", env=env)
    server.start()
    yield server
    assert server.stop() == 0


def call(client: httpx.Client, route: ApiRoute, key: str | None) -> httpx.Response:
    """The route called with `key` where its clients put one (a native reporter's upload: an empty
    envelope, which names no project that exists)."""
    method, template = route.method, route.path
    path = template.format(reportId="1", name="a.txt", board="roles", playerId="p1", projectId="7", key=key,
                           debugFile="game.pdb", debugId="0" * 33, build="1.0",
                           signature="0" * 16)
    if route.credential != "api-key":
        auth = {"X-Sentry-Auth": f"Sentry sentry_key={key}"} if key and route.credential == "sentry" else {}
        return client.request(method, path, content=b"{}\n",
                              headers={"Content-Type": "application/x-sentry-envelope", **auth})
    headers = {"x-api-key": key} if key else {}
    return client.request(method, path, json=BODIES.get(template) if method in ("POST", "PUT") else None,
                          params=PARAMS.get(template), headers=headers)


@pytest.mark.parametrize("route", API_ROUTES, ids=[f"{r.method} {r.path}" for r in API_ROUTES])
def test_each_key_can_do_exactly_what_its_role_allows(keyed: Serve, route: ApiRoute):
    with httpx.Client(base_url=keyed.url, timeout=30) as client:
        if route.path == "/v1/health":
            assert all(call(client, route, k).status_code == 200 for k in [None, "bogus", *KEYS.values()])
            return
        # a key in the path cannot be left out: a path without it is another, with no route
        missing = [] if route.credential == "path" else [None]
        for key in (*missing, "bogus", KEYS[Role.READ] + "x", KEYS[Role.READ][:-1]):
            response = call(client, route, key)
            assert (response.status_code, response.json()["error"]) == (401, "unauthorized"), key
        for role, key in KEYS.items():
            response = call(client, route, key)
            if role in (route.roles or ()):
                assert response.status_code not in (401, 403), (role, response.text)
            else:
                assert (response.status_code, response.json()["error"]) == (403, "forbidden"), role


def test_open_parts_and_no_key_in_the_log(keyed: Serve):
    with httpx.Client(base_url=keyed.url) as client:
        assert client.get("/").status_code == 200 and client.get("/dashboard/app.js").status_code == 200
    log = Path(keyed.log_path).read_text()
    assert "API keys: 1 ingest, 1 server, 1 read" in log
    assert not any(key in log for key in KEYS.values())


def test_without_keys_serve_keeps_to_loopback(tmp_path: Path):
    server = Serve(tmp_path / "data", tmp_path / "serve.log", host="0.0.0.0")
    server.start()  # healthy on 127.0.0.1
    try:
        assert "serving on 127.0.0.1 only, not 0.0.0.0" in server.log_path.read_text()
    finally:
        assert server.stop() == 0


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def test_a_port_taken_between_its_choice_and_serve_s_bind_is_chosen_again(tmp_path: Path):
    """free_port probes and lets go, and serve binds later: under a parallel test run another process
    (another test's serve, healthy) can take the port in between, and the serve of a test exited with
    EADDRINUSE; found in review: a healthy one there was taken for the test's own."""
    server = Serve(tmp_path / "data", tmp_path / "serve.log")
    other = ThreadingHTTPServer(("127.0.0.1", server.port), _Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = server.port
    try:
        server.start()
    finally:
        other.shutdown()
        other.server_close()
    try:
        assert server.port != taken
        assert httpx.get(f"{server.url}/v1/health", timeout=5).json()["status"] == "ok"
    finally:
        assert server.stop() == 0


def test_a_game_server_reads_the_boards_it_posts_to_and_no_crash(keyed: Serve):
    """Found from outside: a server key got 403 on every leaderboard read, so a game showing ranks had
    to ship the read key, which reads every crash report too."""
    server = {"x-api-key": KEYS[Role.SERVER]}
    with httpx.Client(base_url=keyed.url, headers=server, timeout=30) as client:
        for method, path, body in [("GET", "/v1/leaderboards/roles/top", None),
                                   ("GET", "/v1/leaderboards/roles/around/p1", None),
                                   ("GET", "/v1/leaderboards/roles/players/p1", None),
                                   ("POST", "/v1/leaderboards/roles/players:ranks", {"playerIds": ["p1"]}),
                                   ("GET", "/v1/leaderboards", None), ("GET", "/v1/leaderboards/roles/seasons", None)]:
            assert client.request(method, path, json=body).status_code not in (401, 403), path
        for path in ("/v1/crashes", "/v1/stats", "/v1/crash-groups", "/v1/releases"):
            assert client.get(path, params={"sku": "roles:pc"}).status_code == 403, path
