"""api/openapi.yaml and the handlers against the route table (lambdas.functions.API_ROUTES): each
function's handler declares exactly its routes, the document has exactly them with the keys their
roles take; each GET route's query parameters, as its handler's signature declares them
(Powertools writes them into an OpenAPI document), are the contract's, with the same names, whether
each is required, its default, its enum and its bounds; and each body's fields are those of the
model it is validated with, with the same bounds. A parameter added, dropped or re-bounded on
one side only fails here (the contract once allowed crash-groups limit 1000, the code 100)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.access import READERS
from crashes.model import CrashSubmission
from lambdas import capture, leaderboards, reporter
from lambdas.functions import API_ROUTES
from ranking.model import BoardSettingsBody, Score
from sessions.model import SessionEvent

CONTRACT = yaml.safe_load((Path(__file__).resolve().parents[2] / "api" / "openapi.yaml").read_text())
# what the document says of a parameter's value, in OpenAPI's words (pydantic writes ge and le)
SAID = {"required": "required", "default": "default", "enum": "enum", "minimum": "minimum", "maximum": "maximum",
        "ge": "minimum", "le": "maximum", "pattern": "pattern"}
# what the document says of a body's field: its bounds, whatever the JSON types it may take
BOUNDS = ("pattern", "minLength", "maxLength", "minimum", "maximum", "enum", "maxProperties")
# each body's schema in the document, and the model capture or the board route validates it with
BODIES = {"CrashSubmission": CrashSubmission, "Session": SessionEvent, "Score": Score,
          "BoardSettingsBody": BoardSettingsBody}


def shape(path: str) -> str:
    """A route template with its parameters unnamed: /v1/crashes/{reportId} → /v1/crashes/{}."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def facts(parameter: dict[str, Any]) -> dict[str, Any]:
    schema = dict(parameter["schema"])
    if "$ref" in schema:
        schema = dict(CONTRACT["components"]["schemas"][schema.pop("$ref").rsplit("/", 1)[1]]) | schema
    for option in schema.pop("anyOf", []):  # an optional value: int | None
        schema |= {k: v for k, v in option.items() if k != "type"}
    said = {SAID[k]: v for k, v in schema.items() if k in SAID}
    return said | {"required": bool(parameter.get("required"))}


def query_parameters(operation: dict[str, Any], components: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resolved = [components[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in operation.get("parameters", [])]
    return {p["name"]: facts(p) for p in resolved if p["in"] == "query"}


def code_routes() -> dict[str, dict[str, Any]]:
    routes: dict[str, dict[str, Any]] = {}
    for app in (reporter.app, leaderboards.app):
        for path, operations in json.loads(app.get_openapi_json_schema())["paths"].items():
            if "get" in operations:
                routes[shape(path)] = query_parameters(operations["get"], {})
    return routes


CODE = code_routes()
DOCUMENTED = {shape(path): query_parameters(operations["get"], CONTRACT["components"]["parameters"])
              for path, operations in CONTRACT["paths"].items() if "get" in operations}


def test_the_same_get_routes():
    assert sorted(CODE) == sorted(DOCUMENTED)


@pytest.mark.parametrize("route", sorted(DOCUMENTED))
def test_a_get_routes_query_parameters_are_the_contracts(route: str):
    code, documented = CODE[route], DOCUMENTED[route]
    assert sorted(code) == sorted(documented)
    for name in documented:
        # the code's Python type says what a value becomes; the document says what a URL carries
        assert code[name] == documented[name], name


def test_each_handler_declares_exactly_its_functions_routes():
    for function, app in (("capture", capture.app), ("reporter", reporter.app), ("leaderboards", leaderboards.app)):
        declared = {(method.upper(), shape(path)) for path, operations in
                    json.loads(app.get_openapi_json_schema())["paths"].items() for method in operations}
        assert declared == {(r.method, shape(r.path)) for r in API_ROUTES if r.function == function}, function


def test_the_document_asks_each_route_for_the_keys_of_its_roles():
    default = CONTRACT["security"]
    for route in API_ROUTES:
        security = CONTRACT["paths"][route.path][route.method.lower()].get("security", default)
        schemes = {name for requirement in security for name in requirement}
        expected = set() if route.roles is None else {"readKey"} if route.roles == READERS else {"apiKey"}
        assert schemes == expected, (route.method, route.path)


def bounds(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        schema = definitions[schema["$ref"].rsplit("/", 1)[1]] | {k: v for k, v in schema.items() if k != "$ref"}
    said = {k: schema[k] for k in BOUNDS if k in schema}
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):  # pydantic's anyOf, the document's oneOf
        said |= bounds(option, definitions)
    return said


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_bodys_fields_are_the_models(name: str):
    documented = CONTRACT["components"]["schemas"][name]
    model = BODIES[name].model_json_schema(by_alias=True)
    assert sorted(documented["properties"]) == sorted(model["properties"])
    assert sorted(documented.get("required", [])) == sorted(model.get("required", []))
    assert documented.get("additionalProperties", True) == model.get("additionalProperties", True)
    for field, schema in model["properties"].items():
        assert bounds(documented["properties"][field], CONTRACT["components"]["schemas"]) == \
            bounds(schema, model.get("$defs", {})), field
