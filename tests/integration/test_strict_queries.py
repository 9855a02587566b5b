"""Every route but capture's takes the query parameters the contract lists for it and refuses any
other, or one given twice, with 400 invalid_field naming it: run through each function's handler.
A write is refused before it does anything (a misspelt season would let a deletion go ahead)."""

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
# capture and the native clients parse their own bodies and queries (api.resolver.create_resolver)
UNTYPED = {"capture", "native"}
ROUTES = [(r.method, r.path, r.function) for r in API_ROUTES if r.function not in UNTYPED]
GETS = [(path, function) for method, path, function in ROUTES if method == "GET"]
# the sorted-first unknown name is the one named, so a name after every real one is named last
UNKNOWN = "zzz"


def documented(path: str, method: str = "GET") -> list[str]:
    return [p["name"] for p in CONTRACT["paths"][path][method.lower()].get("parameters", []) if p["in"] == "query"]


def get(path: str, function: str, query: dict[str, list[str]], method: str = "GET") -> dict[str, Any]:
    event = load_event("reporter-list-crashes.json") | {
        "httpMethod": method,
        "path": path.format(reportId="1", name="a.txt", board="b", playerId="p", projectId="7", build="1.0",
                            signature="0" * 16, debugFile="a.pdb", debugId="0" * 33),
        "queryStringParameters": {name: values[-1] for name, values in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
    }
    response = load_handler(function)(event, LocalContext(function_name=function))
    return {"status": response["statusCode"], **json.loads(response["body"] or "{}")}


@pytest.mark.parametrize(("method", "path", "function"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_an_unknown_parameter_is_refused_on_every_route(adapters: Adapters, method: str, path: str, function: str):
    for query in ({UNKNOWN: ["1"]}, {"sort": ["desc"]}, {"SKU": ["g"]}):
        answer = get(path, function, {"sku": ["g"], **query} if "sku" in documented(path, method) else query, method)
        assert (answer["status"], answer["error"], answer["field"]) == (400, "invalid_field", next(iter(query)))


@pytest.mark.parametrize(("method", "path", "function"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_documented_parameter_is_taken(adapters: Adapters, method: str, path: str, function: str):
    for name in documented(path, method):
        answer = get(path, function, {name: ["1"], UNKNOWN: ["1"]}, method)
        assert answer["field"] == UNKNOWN, (name, answer)


TAKING = [r for r in ROUTES if documented(r[1], r[0])]


@pytest.mark.parametrize(("method", "path", "function"), TAKING, ids=[f"{m} {p}" for m, p, _ in TAKING])
def test_a_parameter_given_twice_is_refused(adapters: Adapters, method: str, path: str, function: str):
    name = documented(path, method)[-1]
    answer = get(path, function, {name: ["1", "2"]}, method)
    assert (answer["status"], answer["error"], answer["field"]) == (400, "invalid_field", name)


@pytest.mark.parametrize("function", sorted({f for _, f in GETS}))
def test_a_path_no_route_takes_is_not_found_whatever_its_query(adapters: Adapters, function: str):
    """Found by schemathesis: a player id no route can match (a control character) with radius=1
    was answered 400 "radius is not a query parameter of this route", the not-found route's."""
    for path in ("/v1/leaderboards/b/around/\x04", "/v1/nowhere"):
        answer = get(path, function, {"radius": ["1"], UNKNOWN: ["1"]})
        assert (answer["status"], answer["error"]) == (404, "not_found"), (path, answer)
