"""The contract written once. api/openapi.yaml is generated from the handlers (api.document): the
checked-in file must be what the code generates now, so a parameter, body or answer changed in
code and not regenerated (or edited by hand in the file) fails here. The generator itself is held
to the route table: each function's handler declares exactly its routes, the document asks each
for the keys its roles take, and the document is valid OpenAPI 3.1. (The contract once allowed
crash-groups limit 1000, the code 100: both now come from the signature.)"""

from __future__ import annotations

import json
import re
from pathlib import Path as FilePath
from typing import Annotated, Any

import pytest
import yaml
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from openapi_spec_validator import validate
from pydantic import BaseModel, Field

from api.access import READERS, Role
from api.document import build, unnamed
from api.params import DIGITS
from api.resolver import answer
from lambdas import capture, leaderboards, reporter
from lambdas.contract import document, render
from lambdas.functions import API_ROUTES, ApiRoute
from ports.errors import BlackboxError
from ports.limits import INT64_MAX

CHECKED_IN = FilePath(__file__).resolve().parents[2] / "api" / "openapi.yaml"
GENERATED = document()


def test_the_checked_in_document_is_the_generated_one():
    assert CHECKED_IN.read_text() == render(), "api/openapi.yaml is not what the code generates: run `make openapi`"


def test_the_document_is_valid_openapi_3_1():
    validate(yaml.safe_load(CHECKED_IN.read_text()))


def test_each_handler_declares_exactly_its_functions_routes():
    for function, app in (("capture", capture.app), ("reporter", reporter.app), ("leaderboards", leaderboards.app)):
        declared = {(method.upper(), unnamed(path)) for path, operations in
                    json.loads(app.get_openapi_json_schema())["paths"].items() for method in operations}
        assert declared == {(r.method, unnamed(r.path)) for r in API_ROUTES if r.function == function}, function


def test_the_document_has_the_tables_routes_with_its_names():
    documented = {(method.upper(), path) for path, item in GENERATED["paths"].items() for method in item}
    assert documented == {(r.method, r.path) for r in API_ROUTES}
    for path, item in GENERATED["paths"].items():
        for operation in item.values():
            in_path = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            assert [f"{{{name}}}" for name in in_path] == [part for part in path.split("/") if "{" in part]


def test_the_document_asks_each_route_for_the_keys_of_its_roles():
    # capture takes API keys in AWS too; the other routes there take IAM, as the schemes say; a
    # Sentry SDK's routes take the key where the SDK puts it
    for route in API_ROUTES:
        security = GENERATED["paths"][route.path][route.method.lower()]["security"]
        schemes = {name for requirement in security for name in requirement}
        expected = ({"sentryAuth", "sentryKey"} if route.credential == "sentry" else set() if route.credential == "path"
                    else {"apiKey"} if route.ingest
                    else set() if route.roles is None
                    else {scheme for role, scheme in ((Role.READ, "readKey"), (Role.SERVER, "serverKey"))
                          if role in route.roles})
        assert schemes == expected, (route.method, route.path)
        headers = {p["name"] for p in GENERATED["paths"][route.path][route.method.lower()].get("parameters", [])
                   if p["in"] == "header"}
        assert ("Idempotency-Key" in headers) == route.idempotent, (route.method, route.path)
    # found in review: a route of two roles was documented as the server key's alone
    assert GENERATED["paths"]["/v1/leaderboards/{board}/top"]["get"]["security"] == [{"readKey": []}, {"serverKey": []}]
    assert GENERATED["paths"]["/v1/crashes"]["get"]["security"] == [{"readKey": []}]


def test_no_route_answers_powertools_422_and_every_error_is_the_contracts():
    for path, item in GENERATED["paths"].items():
        for method, operation in item.items():
            statuses = set(operation["responses"])
            assert "422" not in statuses, (method, path)
            # the gateways' answers, before any route's code
            assert {"400", "401", "403", "408", "413", "429", "431", "500", "501", "503"} <= statuses, (method, path)
            assert ("404" in statuses) == ("{" in path), (method, path)
            assert ("415" in statuses) == ("requestBody" in operation), (method, path)
    # a route's own answer at an error's status may still be a gateway's error
    shed = GENERATED["paths"]["/v1/health"]["get"]["responses"]["503"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/Error"} in shed["anyOf"]


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, operation) for path, item in GENERATED["paths"].items()
            for method, operation in item.items()]


def test_every_status_a_route_says_it_answers_is_declared():
    """Found from outside: merge said (and answered) 409 and its responses left it out, so a client
    generated from the contract met an answer it did not know."""
    for method, path, operation in _operations():
        said = set(re.findall(r"\b([45]\d\d)\b", operation.get("description", "")))
        assert said <= set(operation["responses"]), (method, path, said - set(operation["responses"]))


def test_every_error_code_is_at_a_status_some_route_declares():
    """Found from outside: not_implemented (501, a Transfer-Encoding serve does not decode) and
    internal (500) were answered, and no route declared either."""
    declared = {status for _, _, operation in _operations() for status in operation["responses"]}
    errors = [BlackboxError, *_subclasses(BlackboxError)]
    assert {str(error.status) for error in errors} <= declared
    assert {error.code for error in errors} <= set(GENERATED["components"]["schemas"]["Error"]["properties"]["error"]
                                                   ["enum"])


def _subclasses(kind: type[BlackboxError]) -> list[type[BlackboxError]]:
    return [found for sub in kind.__subclasses__() for found in (sub, *_subclasses(sub))]


def test_path_parameters_are_named_by_name_whatever_the_signatures_order():
    """The reviewer's find: names were handed out in the path's order to parameters listed in the
    signature's, so a handler taking (player_id, board) had each other's schema."""
    app = APIGatewayRestResolver(enable_validation=True)

    @app.get("/v1/b/<board>/p/<player_id>")
    def swapped(player_id: Annotated[str, Path(max_length=7)], board: Annotated[str, Path(max_length=3)],
                ) -> Response[str]:
        raise NotImplementedError

    route = ApiRoute("GET", "/v1/b/{boardName}/p/{playerId}", "leaderboards", READERS)
    parameters = build([app], {(route.method, route.path): route})["paths"][route.path]["get"]["parameters"]
    assert {p["name"]: p["schema"]["maxLength"] for p in parameters} == {"boardName": 3, "playerId": 7}


class _Ranked(BaseModel):
    score: Annotated[int, Field(le=INT64_MAX)]


def _rank_route(answered_with_model: bool) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)

    @app.get("/v1/rank", responses={200: answer(_Ranked, "a rank")} if answered_with_model else None)
    def rank(score: Annotated[int, Query(le=INT64_MAX), DIGITS]) -> Response[str]:
        raise NotImplementedError

    return app


def test_a_bound_beyond_a_float_is_written_exactly_or_refused():
    """Powertools holds a document's bounds as floats: 2**63 - 1 became 2**63. A parameter's bound
    (parsed as the API parses integers, api.params.DIGITS) reaches the document exactly; one that went
    through a float is refused, never rounded."""
    routes = {("GET", "/v1/rank"): ApiRoute("GET", "/v1/rank", "leaderboards", READERS)}
    with pytest.raises(ValueError, match=r"beyond 2\*\*53"):
        build([_rank_route(answered_with_model=True)], routes)
    parameters = build([_rank_route(answered_with_model=False)], routes)["paths"]["/v1/rank"]["get"]["parameters"]
    assert parameters[0]["schema"]["maximum"] == INT64_MAX
