"""API Gateway's body models are a first gate derived from the contract (stacks/api.py): what a
handler takes, the gate must let through, or AWS would refuse what `blackbox serve` accepts. Each
sample goes through both: the route's JsonBody (the handler's parse) and draft-04, as API Gateway
validates. No synth: the gates are plain schemas."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from jsonschema import Draft4Validator

from api.requests import JsonBody, Posted
from lambdas import capture, issues, leaderboards, projects
from lambdas.functions import API_ROUTES
from ports.errors import BlackboxError
from stacks.api import OPERATIONS, _body_gate

ROUTES: dict[tuple[str, str], tuple[JsonBody[Any], bool]] = {
    ("POST", "/v1/crashes"): (capture.CRASH, False),
    ("POST", "/v1/sessions"): (capture.SESSIONS, True),
    ("POST", "/v1/scores"): (capture.SCORES, True),
    ("PUT", "/v1/leaderboards/{board}"): (leaderboards.SETTINGS, False),
    ("POST", "/v1/leaderboards/{board}/players:ranks"): (leaderboards.RANKS_OF, False),
    ("POST", "/v1/leaderboards/{board}/attempts"): (leaderboards.ATTEMPT, False),
    ("PUT", "/v1/projects/{projectId}"): (projects.PROJECT, False),
    ("PUT", "/v1/crash-groups/{signature}/state"): (issues.STATE, False),
    ("PUT", "/v1/webhooks/{name}"): (issues.WEBHOOK, False),
    ("POST", "/v1/crash-groups/{signature}/merge"): (issues.MERGE, False),
    ("PUT", "/v1/crash-groups:rules"): (issues.RULES, False),
}
ASTRAL_ID = "\U0001d49c" * 128  # 128 letters (MATHEMATICAL SCRIPT CAPITAL A), 256 UTF-16 units
TAKEN = [
    ("POST", "/v1/crashes", {"sku": "skyrift:pc", "crashType": "AV", "errorCode": 7.0, "clientTime": 107.0,
                             "playerId": ASTRAL_ID, "custom": {"any": [1, "thing"]},
                             "attachments": {"shot.png": base64.b64encode(b"png").decode()}}),
    ("POST", "/v1/crashes", {"sku": "g", "errorCode": "E_7", "stackTrace": None}),
    ("POST", "/v1/sessions", []),
    ("POST", "/v1/sessions", [{"sku": "g", "kind": "client", "playerId": ASTRAL_ID}] * 500),
    ("POST", "/v1/sessions", {"sku": "g", "kind": "client", "buildVersion": ASTRAL_ID, "status": "crashed"}),
    ("PUT", "/v1/crash-groups/{signature}/state", {"state": "resolved", "inBuild": ASTRAL_ID}),
    ("PUT", "/v1/crash-groups/{signature}/state", {"state": "ignored", "ignoreUntil": "2026-12-01T00:00:00Z",
                                                   "ignoreForReports": 1000}),
    ("PUT", "/v1/webhooks/{name}", {"url": "https://hooks.example.com/" + "x" * 2000, "secret": "!~" * 128,
                                    "alerts": ["new-group", "regressed"]}),
    ("POST", "/v1/crash-groups/{signature}/merge", {"into": "0123456789abcdef"}),
    ("PUT", "/v1/crash-groups:rules", {}),
    ("PUT", "/v1/crash-groups:rules", {"skip": ["in std::*", "\U0001d49c" * 200] * 25,
                                       "join": ["*operator new*", "in [mc]alloc"]}),
    ("POST", "/v1/scores", {"board": "b", "playerId": ASTRAL_ID, "score": 9.0}),
    ("POST", "/v1/scores", [{"board": "b", "playerId": "p", "score": -(2 ** 63)}]),
    ("POST", "/v1/scores", {"board": "b", "playerId": "p", "score": 1, "metadata": {
        "car": "r" * 128, "lap": 3, "time": 61.5, "clean": True, "ghost": None, **{f"k{i}": i for i in range(11)}}}),
    ("PUT", "/v1/leaderboards/{board}", {}),
    ("PUT", "/v1/leaderboards/{board}", {"order": "asc", "operator": "incr"}),
    ("PUT", "/v1/leaderboards/{board}", {"operator": "decr", "reset": "0 6 * * 5"}),
    ("POST", "/v1/leaderboards/{board}/players:ranks", {"playerIds": [ASTRAL_ID, *(f"p{i}" for i in range(999))]}),
    ("PUT", "/v1/projects/{projectId}", {"sku": "skyrift:pc"}),
    ("PUT", "/v1/leaderboards/{board}", {"startsAt": "2026-12-01T00:00:00Z", "endsAt": "2026-12-08T00:00:00Z",
                                         "maxAttempts": 3, "maxPlayers": None}),
    ("POST", "/v1/leaderboards/{board}/attempts", {"playerId": ASTRAL_ID, "score": 9.0}),
    ("POST", "/v1/leaderboards/{board}/attempts", {"playerId": "p", "score": -(2 ** 63), "subscore": 2,
                                                   "metadata": {"lap": 3}}),
]
REFUSED = [
    ("POST", "/v1/crashes", {"crashType": "AV"}),
    ("POST", "/v1/crashes", {"sku": "no spaces"}),
    ("POST", "/v1/sessions", [{"sku": "g", "kind": "client"}] * 501),
    ("POST", "/v1/sessions", {"sku": "g", "kind": "client", "status": "exited"}),
    ("PUT", "/v1/crash-groups/{signature}/state", {"state": "regressed"}),
    ("PUT", "/v1/crash-groups/{signature}/state", {"state": "resolved", "inBuild": 2}),
    ("PUT", "/v1/webhooks/{name}", {"url": "https://hooks.example.com/x", "alerts": ["regressed"]}),
    ("PUT", "/v1/webhooks/{name}", {"url": "https://hooks.example.com/x", "secret": "0123456789abcdef",
                                    "alerts": ["regressed"], "extra": 1}),
    ("POST", "/v1/crash-groups/{signature}/merge", {}),
    ("POST", "/v1/crash-groups/{signature}/merge", {"into": "NOT-HEX"}),
    ("PUT", "/v1/crash-groups:rules", {"skip": ["in std::*"] * 51}),
    ("PUT", "/v1/crash-groups:rules", {"join": [""]}),
    ("PUT", "/v1/crash-groups:rules", {"join": "in malloc"}),
    ("PUT", "/v1/crash-groups:rules", {"skip": [], "regex": [".*"]}),
    ("POST", "/v1/scores", {"board": "b", "playerId": "p", "score": "7"}),
    ("POST", "/v1/scores", {"board": "b", "playerId": "p", "score": 1, "extra": 1}),
    ("POST", "/v1/scores", {"board": "b", "playerId": "p", "score": 1, "metadata": {"nested": {"a": 1}}}),
    ("POST", "/v1/scores", {"board": "b", "playerId": "p", "score": 1, "metadata": {f"k{i}": i for i in range(17)}}),
    ("PUT", "/v1/leaderboards/{board}", {"order": "sideways"}),
    ("PUT", "/v1/leaderboards/{board}", {"reset": 7}),
    ("POST", "/v1/leaderboards/{board}/players:ranks", {"playerIds": []}),
    ("POST", "/v1/leaderboards/{board}/players:ranks", {"playerIds": ["p"] * 1001}),
    ("PUT", "/v1/projects/{projectId}", {"sku": "skyrift:pc", "name": "Skyrift"}),
    ("PUT", "/v1/projects/{projectId}", {}),
    ("PUT", "/v1/leaderboards/{board}", {"maxAttempts": 0}),
    ("POST", "/v1/leaderboards/{board}/attempts", {"board": "b", "playerId": "p", "score": 1}),
    ("POST", "/v1/leaderboards/{board}/attempts", {"playerId": "p", "score": "7"}),
    ("POST", "/v1/leaderboards/{board}/attempts", {"score": 1}),
]


def test_every_route_with_a_body_has_a_gate():
    keyed = {(route.method, route.path) for route in API_ROUTES if route.credential == "api-key"}
    assert {key for key, operation in OPERATIONS.items() if key in keyed and _body_gate(operation)} == set(ROUTES)


def handler_takes(method: str, path: str, body: Any) -> bool:
    parser, batch = ROUTES[method, path]
    posted = Posted(json.dumps(body).encode(), "application/json")
    try:
        parser.many(posted) if batch else parser.one(posted)
    except BlackboxError:
        return False
    return True


@pytest.mark.parametrize(("method", "path", "body"), TAKEN, ids=[f"{m} {p} {i}" for i, (m, p, _) in enumerate(TAKEN)])
def test_what_a_handler_takes_the_gate_lets_through(method: str, path: str, body: Any):
    assert handler_takes(method, path, body)
    gate = _body_gate(OPERATIONS[method, path])
    Draft4Validator.check_schema(gate)
    assert list(Draft4Validator(gate).iter_errors(body)) == []


@pytest.mark.parametrize(("method", "path", "body"), REFUSED,
                         ids=[f"{m} {p} {i}" for i, (m, p, _) in enumerate(REFUSED)])
def test_what_the_gate_refuses_a_handler_refuses(method: str, path: str, body: Any):
    assert not Draft4Validator(_body_gate(OPERATIONS[method, path])).is_valid(body)
    assert not handler_takes(method, path, body)
