"""The OpenAPI document, generated from the code that serves it: each route's parameters, body and
answers as its handler declares them (Powertools reads the signatures; api.requests.JsonBody and
api.resolver.answer declare bodies and answers), who may call it from the route table, and the
contract's errors from one catalogue here. `blackbox openapi` writes it to api/openapi.yaml;
tests/unit/test_contract_drift.py fails when the file and the code part."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from api.access import API_KEY_HEADER, Role
from api.requests import BODY_EXTENSION, MAX_IN_FLIGHT
from ports.errors import BlackboxError
from ports.limits import MAX_BODY_BYTES, MAX_IDEMPOTENCY_KEY_CHARS

OPENAPI_VERSION = "3.1.0"
SCHEMAS = "#/components/schemas/"

DESCRIPTION = f"""\
Crash reporting and leaderboards for online games. POSTs take an API key (`x-api-key`; ingest keys
post crashes and sessions, server keys also scores; a title's ingest key posts only its own skus,
and 403 for any other); reads need a read key locally (a leaderboard's, a read or a server key) and
IAM (SigV4) in AWS. A 429 says when to
retry (`Retry-After`, seconds): the key's usage plan, or too many requests from one address. Times
in answers are RFC 3339 UTC with milliseconds; query parameters take RFC 3339 (with a zone) or epoch
milliseconds, within the years 1 to 9999 in UTC.

Every answer carries `X-Content-Type-Options: nosniff` and `Cache-Control: no-store` (the
dashboard's own files: `no-cache`). A POST or PUT body needs `Content-Type: application/json`
(none: 415) and at most 1 MiB as sent (413; `blackbox serve` answers from
`Content-Length` before reading the body, or stops reading a streamed body at the limit, and closes
the connection). `blackbox serve` also gives a request's line and headers 10 s and 64 KiB (408
`request_timeout`, 431 `headers_too_large`) and its body 30 s (408), and with no API keys
configured it serves only requests addressed to localhost, 127.0.0.1 or [::1] (any port; else
403), against DNS rebinding. Overloaded, it answers at once rather than queue: past
`BLACKBOX_MAX_IN_FLIGHT` requests in its handlers (default {MAX_IN_FLIGHT}; `/v1/health` has a few
places past it), or with 128 MiB of bodies still arriving, a route is answered 503 `unavailable`
with `Retry-After` before a handler runs (as a rule before its body is read), so nothing of it was
published; send it again after that many seconds with the same `Idempotency-Key`. A JSON body holds
at most 131,072 values (400 `invalid_field`).

A GET takes exactly the query parameters listed for it, each at most once: any other (say `sort`,
or `Sku` for `sku`), or one given twice, is refused with 400 `invalid_field` naming it, never
silently ignored. Listings are bounded: `limit`, and `nextCursor` to pass back as `cursor` for the
next page (null on the last).

Patterns are Python's regular expressions (`\\w` is Unicode letters, digits and `_`)."""

SECURITY_SCHEMES = {
    "apiKey": {
        "type": "apiKey", "in": "header", "name": API_KEY_HEADER,
        "description": "an ingest key (crashes, sessions), a title's ingest key (the same, for its own skus only) "
                       "or a server key (also scores, leaderboard settings and reads); `blackbox serve` takes a title "
                       "key as BLACKBOX_API_KEYS__INGEST='[{\"key\": \"…\", \"skus\": [\"…\"]}]'",
    },
    "readKey": {
        "type": "apiKey", "in": "header", "name": API_KEY_HEADER,
        "description": "a read key under `blackbox serve`; in AWS these routes take IAM (SigV4) instead",
    },
    "serverKey": {
        "type": "apiKey", "in": "header", "name": API_KEY_HEADER,
        "description": "a server key under `blackbox serve`; in AWS these routes take IAM (SigV4) instead",
    },
    # where Sentry SDKs put the key of a DSN (also `Authorization: Sentry …` or `Basic`)
    "sentryAuth": {
        "type": "apiKey", "in": "header", "name": "X-Sentry-Auth",
        "description": "`Sentry sentry_key=<ingest key>, sentry_version=7, sentry_client=…`: an ingest key, as "
                       "the DSN `http://<ingest key>@<host>/<projectId>` gives it to the SDK",
    },
    "sentryKey": {"type": "apiKey", "in": "query", "name": "sentry_key", "description": "the same, in the URL"},
}

IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key", "in": "header",
    "description": "1 to 256 characters, each byte a character (HTTP's headers are bytes: é in UTF-8 is two). "
                   "A retry with the same key (and sku or board) is the same event, never a second one, and gets "
                   "the same receipt. The first body under a key is kept: another body under the same key never "
                   "replaces it; it is set aside in the dead-letter topic with the reason idempotency_conflict "
                   "(capture holds no state, so it cannot refuse it when it arrives)",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY_CHARS},
}

# the other routes that take one: a request the route itself decides (a tournament's attempt, a
# record's deletion), so it can answer a retry as it answered the first
RETRY_KEY = {
    **IDEMPOTENCY_KEY,
    "description": "a retry with the same key (and board) is the same request: what it changes happens once, and "
                   "it gets the first answer. Another body under the same key (a deletion: another player) changes "
                   "nothing: it is refused where the route says so (409 idempotency_conflict), else set aside in "
                   "the dead-letter topic with the reason idempotency_conflict",
}

RETRY_AFTER: dict[str, Any] = {"description": "seconds to wait before trying again",
                                "schema": {"type": "integer", "minimum": 1}}


@dataclass(frozen=True)
class ErrorAnswer:
    """An error status of the contract: its name in the components and what it means."""

    name: str
    description: str
    headers: Mapping[str, Any] | None = None


ERRORS = {
    400: ErrorAnswer("BadRequest", "invalid_json, missing_field or invalid_field; bad_request for a request HTTP "
                                   "cannot read (the gateway's own answer)"),
    401: ErrorAnswer("Unauthorized", "no key where one is needed"),
    403: ErrorAnswer("Forbidden", "a key whose role does not allow this, or a title's key posting another title's sku "
                                  "(a native route's project of another title is 404 to it, as an unknown one)"),
    404: ErrorAnswer("NotFound", "not_found"),
    408: ErrorAnswer("RequestTimeout", "request_timeout (`blackbox serve`: a request's line and headers not sent "
                                       "within 10 s, or its body within 30 s; the connection is closed)"),
    413: ErrorAnswer("PayloadTooLarge", f"payload_too_large (a body over {MAX_BODY_BYTES} bytes as sent, or a "
                                        "Content-Length saying so, whatever the method; the connection is closed)"),
    415: ErrorAnswer("UnsupportedMediaType", "unsupported_media_type (no Content-Type, or not JSON)"),
    429: ErrorAnswer("Throttled", "throttled (the key's usage plan, or too many requests from one address)",
                     {"Retry-After": RETRY_AFTER}),
    431: ErrorAnswer("HeadersTooLarge", "headers_too_large (`blackbox serve`: a request's line and headers over "
                                        "64 KiB; the connection is closed)"),
    500: ErrorAnswer("Internal", "internal: a fault of Blackbox's own, which its log tells with the request's "
                                 "correlation id; retry with the same Idempotency-Key"),
    501: ErrorAnswer("NotImplemented", "not_implemented (`blackbox serve`: a Transfer-Encoding other than chunked, "
                                       "which it does not decode; the connection is closed)"),
    503: ErrorAnswer("Unavailable",
                     "unavailable: a store did not answer, or (with `Retry-After`) `blackbox serve` had as many "
                     "requests in hand as it takes and shed this one unread and unpublished; either way retry "
                     "with the same Idempotency-Key",
                     {"Retry-After": {**RETRY_AFTER, "description": "when shed: " + RETRY_AFTER["description"]}}),
}
# the gateways' answers come before any route's code: any route may get them
ALWAYS = (400, 401, 403, 408, 413, 429, 431, 500, 501, 503)
WITH_PATH_PARAMETER = (404,)
WITH_BODY = (415,)


def _codes(error: type[BlackboxError]) -> set[str]:
    return {error.code}.union(*(_codes(sub) for sub in error.__subclasses__()))


# what `error` may say: each error's code (internal too: a fault is answered so), and API
# Gateway's own (stacks/api.py GATEWAY_ERRORS)
GATEWAY_CODES = frozenset({"throttled", "bad_request"})
ERROR_CODES = sorted(_codes(BlackboxError) | GATEWAY_CODES)
ERROR_SCHEMA = {
    "type": "object", "required": ["error", "message"], "additionalProperties": False,
    "properties": {
        "error": {"type": "string", "enum": ERROR_CODES},
        "message": {"type": "string", "minLength": 1},
        "field": {"type": "string"},
    },
}


class RouteFacts(Protocol):
    """What the route table says of a route (lambdas.functions.ApiRoute)."""

    @property
    def roles(self) -> frozenset[Role] | None: ...

    @property
    def ingest(self) -> bool: ...

    @property
    def idempotent(self) -> bool: ...

    @property
    def credential(self) -> str: ...


def unnamed(path: str) -> str:
    """A route template with its parameters unnamed: /v1/crashes/{reportId} → /v1/crashes/{}; and
    without a trailing slash, which Powertools' document leaves out (Sentry's /api/{}/envelope/)."""
    return re.sub(r"\{[^}]+\}", "{}", path).rstrip("/")


def security(route: RouteFacts) -> list[dict[str, list[str]]]:
    if route.credential == "sentry":
        return [{"sentryAuth": []}, {"sentryKey": []}]
    if route.credential == "path":  # no scheme says a path holds a key: its parameter does
        return []
    if route.ingest:
        return [{"apiKey": []}]
    if route.roles is None:
        return []
    # either key a route's roles name: a leaderboard read takes a read key or a server key
    return [{scheme: []} for role, scheme in ((Role.READ, "readKey"), (Role.SERVER, "serverKey"))
            if role in route.roles]


def build(apps: Iterable[APIGatewayRestResolver], routes: Mapping[tuple[str, str], RouteFacts]) -> dict[str, Any]:
    """The document of these resolvers' routes; `routes` maps (METHOD, path template) to what the
    route table says of each, and its templates name the path parameters as the contract does."""
    by_shape = {(method, unnamed(path)): path for method, path in routes}
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {}
    for app in apps:
        generated = app.get_openapi_schema(openapi_version=OPENAPI_VERSION).model_dump(
            mode="json", by_alias=True, exclude_none=True)
        schemas |= generated.get("components", {}).get("schemas", {})
        for generated_path, operations in generated["paths"].items():
            for method, operation in operations.items():
                path = by_shape[method.upper(), unnamed(generated_path)]
                if operation.get("summary") == f"{method.upper()} {generated_path}":  # Powertools' stand-in
                    del operation["summary"]
                names = dict(zip(_names(generated_path), _names(path), strict=True))
                paths.setdefault(path, {})[method] = _operation(operation, names, routes[method.upper(), path],
                                                                schemas)
    schemas["Error"] = ERROR_SCHEMA
    # only what a route refers to: not Powertools' 422 bodies (its validation errors are answered
    # 400 here, api.resolver), nor the models it takes query parameters from
    schemas = {name: schemas[name] for name in reached(paths, schemas) | {"Error"}}
    document = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "Blackbox", "version": "1", "description": DESCRIPTION},
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "paths": _untitled(dict(sorted(paths.items()))),
        "components": {
            "securitySchemes": SECURITY_SCHEMES,
            "responses": {error.name: _error_response(error) for error in ERRORS.values()},
            "schemas": _untitled(dict(sorted(schemas.items()))),
        },
    }
    exact: dict[str, Any] = _exact(document)
    return exact


def reached(value: Any, schemas: Mapping[str, Any]) -> set[str]:
    """The component schemas `value` refers to, and those they refer to."""
    found: set[str] = set()
    pending = [value]
    while pending:
        for name in re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(pending.pop())):
            if name not in found:
                found.add(name)
                pending.append(schemas[name])
    return found


def _names(path: str) -> list[str]:
    return re.findall(r"\{([^}]+)\}", path)


def _bodiless(status: str, answer: dict[str, Any]) -> dict[str, Any]:
    """204 has no body, whatever type the handler's signature names (Powertools writes one)."""
    return {k: v for k, v in answer.items() if k != "content"} if status == "204" else answer


def _operation(operation: dict[str, Any], names: Mapping[str, str], route: RouteFacts,
               schemas: dict[str, Any]) -> dict[str, Any]:
    """`names`: the handler's name of each path parameter → the contract's."""
    parameters = [_parameter(p, names[p["name"]] if p["in"] == "path" else p["name"])
                  for p in operation.get("parameters", [])]
    body = operation.pop(BODY_EXTENSION, None)
    if body is not None:
        operation["requestBody"] = body
        for content in body["content"].values():
            schemas |= content["schema"].pop("$defs", {})
    if route.idempotent:  # a retry carries the same key
        parameters.append(IDEMPOTENCY_KEY if route.ingest else RETRY_KEY)
    if parameters:
        operation["parameters"] = parameters
    answers = {status: _or_error(answer) if int(status) in ERRORS else _bodiless(status, answer)
               for status, answer in operation["responses"].items() if status != "422"}
    statuses = ALWAYS + (WITH_PATH_PARAMETER if names else ()) + (WITH_BODY if body is not None else ())
    for status in sorted(statuses):
        answers.setdefault(str(status), {"$ref": f"#/components/responses/{ERRORS[status].name}"})
    return {**operation, "security": security(route), "responses": answers}


def _or_error(answer: dict[str, Any]) -> dict[str, Any]:
    """A route's own answer at an error's status (health's 503) may still be the error's, from a
    gateway that answered before the route ran."""
    content = {media: {**value, "schema": {"anyOf": [value["schema"], {"$ref": SCHEMAS + "Error"}]}}
               for media, value in answer["content"].items()}
    return {**answer, "content": content}


def _parameter(parameter: dict[str, Any], name: str) -> dict[str, Any]:
    """A parameter as a URL carries it: never null (an optional one is left out), its description
    said once."""
    schema = dict(parameter["schema"])
    options = [option for option in schema.pop("anyOf", []) if option != {"type": "null"}]
    if len(options) == 1:
        schema = options[0] | schema
    elif options:
        schema["anyOf"] = options
    if schema.get("description") == parameter.get("description"):
        schema.pop("description", None)
    return {**parameter, "name": name, "schema": schema}


def _error_response(error: ErrorAnswer) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": error.description,
                              "content": {"application/json": {"schema": {"$ref": SCHEMAS + "Error"}}}}
    if error.headers:
        answer["headers"] = dict(error.headers)
    return answer


def _exact(value: Any, where: str = "") -> Any:
    """Numbers as written: Powertools' models of a document hold bounds as floats (1.0 for 1), exact
    below 2**53 only, so a bound beyond that must not pass through them (api.requests.JsonBody)."""
    if isinstance(value, dict):
        return {k: _exact(v, f"{where}/{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v, f"{where}/{i}") for i, v in enumerate(value)]
    if isinstance(value, float) and value.is_integer():
        if abs(value) >= 2 ** 53:
            raise ValueError(f"{where}: {value} is a float beyond 2**53, no longer the bound the code set; "
                             "an answer's 64-bit integer is ports.limits.Int64Answer")
        return int(value)
    return value


# what pydantic writes of a bound it cannot put in JSON Schema's words (an integer parsed by a
# BeforeValidator, api.params.DIGITS), in those words
_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _untitled(value: Any, properties: bool = False) -> Any:
    """Schemas in JSON Schema's words (a bound pydantic writes raw, as `ge`, as `minimum`) and
    without pydantic's titles ("Crashtype" for crashType), which name nothing a client sees. In a
    `properties` map a key is a field's name, kept whatever it is."""
    if isinstance(value, dict):
        return {k if properties else _BOUNDS.get(k, k): _untitled(v, k == "properties" and not properties)
                for k, v in value.items() if properties or not (k == "title" and isinstance(v, str))}
    if isinstance(value, list):
        return [_untitled(v) for v in value]
    return value
