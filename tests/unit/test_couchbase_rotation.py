"""The Couchbase application secret's rotation (adapters.couchbase.rotation), its four steps as
Secrets Manager runs them, against Secrets Manager (moto) and a stand-in for the cluster's REST API
(no Couchbase Server runs here, and CouchbaseMock takes any password): each rotation sets a new
password on the other user, with the same roles, and makes it current; the user signed in before
keeps its password until the rotation after next; a retried step changes nothing."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

import boto3
import pytest
from moto import mock_aws

from adapters.couchbase.rotation import Rotation

ADMIN = ("Administrator", "admin-pass")
ROLES = [{"role": "bucket_full_access", "bucket_name": "blackbox"}]
STEPS = ("createSecret", "setSecret", "testSecret", "finishSecret")


class Cluster:
    """The users of the cluster's REST API: name → (password, roles)."""

    def __init__(self) -> None:
        self.users: dict[str, tuple[str, list[dict[str, str]]]] = {"blackbox-app": ("first-pass", ROLES)}
        self.puts: list[tuple[str, dict[str, list[str]]]] = []

    def signs_in(self, username: str, password: str) -> bool:
        return (username, password) == ADMIN or self.users.get(username, ("", []))[0] == password


@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, str]]:
    state = Cluster()

    class Rest(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _caller(self) -> tuple[str, str]:
            scheme, _, token = self.headers.get("Authorization", "").partition(" ")
            user, _, password = base64.b64decode(token).decode().partition(":") if scheme == "Basic" else ("", "", "")
            return user, password

        def _answer(self, status: int, body: Any = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            user, password = self._caller()
            if not state.signs_in(user, password):
                return self._answer(401)
            if self.path == "/whoami":
                return self._answer(200, {"id": user})
            name = unquote(self.path.removeprefix("/settings/rbac/users/local/"))
            if (user, password) != ADMIN or name not in state.users:
                return self._answer(403 if (user, password) != ADMIN else 404)
            return self._answer(200, {"id": name, "roles": state.users[name][1]})

        def do_PUT(self) -> None:
            if self._caller() != ADMIN:
                return self._answer(403)
            name = unquote(self.path.removeprefix("/settings/rbac/users/local/"))
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            state.puts.append((name, form))
            bucket = form["roles"][0].removeprefix("bucket_full_access[").removesuffix("]")
            state.users[name] = (form["password"][0], [{"role": "bucket_full_access", "bucket_name": bucket}])
            return self._answer(200)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Rest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def secrets() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


def rotating(secrets: Any, url: str) -> tuple[Rotation, str]:
    """The app's secret as the deployment makes it, and its rotation."""
    admin = secrets.create_secret(Name="admin", SecretString=json.dumps({"username": ADMIN[0], "password": ADMIN[1]}))
    app = secrets.create_secret(Name="app", SecretString=json.dumps({"username": "blackbox-app",
                                                                    "password": "first-pass"}))["ARN"]
    return Rotation(secrets, app, admin["ARN"], url), app


def current(secrets: Any, arn: str) -> dict[str, str]:
    # by its stage: moto's default version does not follow a moved AWSCURRENT, as Secrets Manager's does
    answer = secrets.get_secret_value(SecretId=arn, VersionStage="AWSCURRENT")
    value: dict[str, str] = json.loads(answer["SecretString"])
    return value


def test_each_rotation_moves_to_the_other_user_with_a_new_password(secrets: Any, cluster: tuple[Cluster, str]):
    state, url = cluster
    rotation, app = rotating(secrets, url)
    seen = [current(secrets, app)]
    for _ in range(2):
        token = str(uuid.uuid4())
        for step in STEPS:
            rotation.step(step, token)
            rotation.step(step, token)  # Secrets Manager retries a step that timed out
        seen.append(current(secrets, app))
    assert [s["username"] for s in seen] == ["blackbox-app", "blackbox-app_clone", "blackbox-app"]
    assert len({s["password"] for s in seen}) == 3
    # the clone was made with the app user's roles; each rotation set one user's password (again,
    # the same, when its step was retried)
    puts = dict.fromkeys((name, form["password"][0], form["roles"][0]) for name, form in state.puts)
    assert list(puts) == [("blackbox-app_clone", seen[1]["password"], "bucket_full_access[blackbox]"),
                          ("blackbox-app", seen[2]["password"], "bucket_full_access[blackbox]")]
    # after the first rotation, the user signed in before still signed in with its password
    assert state.signs_in("blackbox-app_clone", seen[1]["password"])
    assert state.signs_in("blackbox-app", seen[2]["password"])
    versions = secrets.describe_secret(SecretId=app)["VersionIdsToStages"]
    assert sum("AWSCURRENT" in stages for stages in versions.values()) == 1


def test_a_password_the_cluster_refuses_fails_the_test_step_and_stays_pending(secrets: Any,
                                                                               cluster: tuple[Cluster, str]):
    _, url = cluster
    rotation, app = rotating(secrets, url)
    token = str(uuid.uuid4())
    rotation.step("createSecret", token)  # no setSecret: the cluster never learns the new password
    with pytest.raises(OSError, match="401"):
        rotation.step("testSecret", token)
    assert current(secrets, app)["username"] == "blackbox-app"
    with pytest.raises(ValueError, match="not pending"):
        rotation.step("setSecret", str(uuid.uuid4()))
