"""Every GET route takes the query parameters the contract lists for it and refuses any other,
or one given twice, with 400 invalid_field naming it: run through each function's handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.factory import Adapters
from lambdas.functions import API_ROUTES, load_handler
from local_runtime.context import LocalContext
from tests.conftest import load_event

CONTRACT = yaml.safe_load((Path(__file__).resolve().parents[2] / "api" / "openapi.yaml").read_text())
GETS = [(r.path, r.function) for r in API_ROUTES if r.method == "GET"]
# the sorted-first unknown name is the one named, so a name after every real one is named last
UNKNOWN = "zzz"


def documented(path: str) -> list[str]:
    return [p["name"] for p in CONTRACT["paths"][path]["get"].get("parameters", []) if p["in"] == "query"]


def get(path: str, function: str, query: dict[str, list[str]]) -> dict[str, Any]:
    event = load_event("reporter-list-crashes.json") | {
        "path": path.format(reportId="1", name="a.txt", board="b", playerId="p", projectId="7", build="1.0",
                            signature="0" * 16),
        "queryStringParameters": {name: values[-1] for name, values in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
    }
    response = load_handler(function)(event, LocalContext(function_name=function))
    return {"status": response["statusCode"], **json.loads(response["body"] or "{}")}


@pytest.mark.parametrize(("path", "function"), GETS, ids=[p for p, _ in GETS])
def test_an_unknown_parameter_is_refused_on_every_route(adapters: Adapters, path: str, function: str):
    for query in ({UNKNOWN: ["1"]}, {"sort": ["desc"]}, {"SKU": ["g"]}):
        answer = get(path, function, {"sku": ["g"], **query} if "sku" in documented(path) else query)
        assert (answer["status"], answer["error"], answer["field"]) == (400, "invalid_field", next(iter(query)))


@pytest.mark.parametrize(("path", "function"), GETS, ids=[p for p, _ in GETS])
def test_every_documented_parameter_is_taken(adapters: Adapters, path: str, function: str):
    for name in documented(path):
        answer = get(path, function, {name: ["1"], UNKNOWN: ["1"]})
        assert answer["field"] == UNKNOWN, (name, answer)


@pytest.mark.parametrize(("path", "function"), [g for g in GETS if documented(g[0])],
                         ids=[p for p, _ in GETS if documented(p)])
def test_a_parameter_given_twice_is_refused(adapters: Adapters, path: str, function: str):
    name = documented(path)[-1]
    answer = get(path, function, {name: ["1", "2"]})
    assert (answer["status"], answer["error"], answer["field"]) == (400, "invalid_field", name)


@pytest.mark.parametrize("function", sorted({f for _, f in GETS}))
def test_a_path_no_route_takes_is_not_found_whatever_its_query(adapters: Adapters, function: str):
    """Found by schemathesis: a player id no route can match (a control character) with radius=1
    was answered 400 "radius is not a query parameter of this route", the not-found route's."""
    for path in ("/v1/leaderboards/b/around/\x04", "/v1/nowhere"):
        answer = get(path, function, {"radius": ["1"], UNKNOWN: ["1"]})
        assert (answer["status"], answer["error"]) == (404, "not_found"), (path, answer)
