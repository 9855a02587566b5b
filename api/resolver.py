"""What every API handler shares: a Powertools resolver whose errors are the contract's."""

from __future__ import annotations

import binascii
import json
import threading
from collections.abc import Mapping, Sequence
from re import Match, Pattern
from typing import Any
from urllib.parse import quote, unquote

import pybase64
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from api.requests import Posted, contract_error
from ports.errors import (
    BlackboxError,
    InvalidField,
    MalformedRequest,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
    UnsupportedMediaType,
)
from ports.limits import MAX_BODY_BYTES, MAX_IDEMPOTENCY_KEY_CHARS, cut
from ports.telemetry import logger

# on every answer: a browser never guesses a type, so no answer runs as a page it was not meant to be;
# and no cache keeps one (a browser's on a shared machine, a proxy's): crash reports, attachments
# and players' records are a studio's data, read with its keys
EVERY_ANSWER = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
# an attachment is whatever a game client sent: opened, it gets no origin, no script, no requests
DOWNLOAD_POLICY = "default-src 'none'; sandbox"


def json_response(status: int, body: Any) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body), headers=EVERY_ANSWER)


def text_response(status: int, text: str) -> Response[str]:
    """Plain text, for the clients that read nothing else (Crashpad's report id, Socorro's CrashID)."""
    return Response(status_code=status, content_type="text/plain; charset=utf-8", body=text, headers=EVERY_ANSWER)


def answer(kind: object, description: str) -> OpenAPIResponse:
    """A route's answer for the OpenAPI document: the type its JSON body has (a TypedDict or a model),
    from which the document's schema is generated."""
    return {"description": description, "content": {"application/json": {"model": kind}}}


def error_answer(description: str, headers: dict[str, Any] | None = None) -> OpenAPIResponse:
    """A route's own error answer for the OpenAPI document (the gateways' are api.document's)."""
    response: OpenAPIResponse = {"description": description,
                                 "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if headers:
        response["headers"] = headers
    return response


def download_response(data: bytes, content_type: str, filename: str) -> Response[bytes]:
    """Bytes a client sent, served as a file to save, never as a page of this origin."""
    return Response(status_code=200, content_type=content_type, body=data, headers={
        **EVERY_ANSWER,
        "Content-Security-Policy": DOWNLOAD_POLICY,
        "Content-Disposition": content_disposition(filename),
    })


def content_disposition(filename: str) -> str:
    """`attachment` with the name (RFC 6266): an ASCII stand-in in `filename` for old clients, the
    exact name in `filename*` when it is not plain ASCII, or holds a `%` (browsers decode %XX in
    `filename`: x%2Eexe would be saved as x.exe)."""
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\%' else "_" for c in filename)
    if fallback == filename:
        return f'attachment; filename="{filename}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def error_response(error: BlackboxError) -> Response[str]:
    response = json_response(error.status, error.body())
    if error.retry_after_s is not None:  # on both paths: Lambda's answers and the local gateway's own
        response.headers["Retry-After"] = str(error.retry_after_s)
    return response


class _PerThreadResolver(APIGatewayRestResolver):
    """Powertools keeps the current event on a class attribute of its BaseRouter, one for the whole
    process. A Lambda container runs one invocation at a time; the local gateway runs many on
    threads, where requests would read each other's bodies. Here each thread keeps its own."""

    _invocation = threading.local()

    @property  # type: ignore[override]  # Powertools declares a plain attribute
    def current_event(self) -> APIGatewayProxyEvent:
        event: APIGatewayProxyEvent = self._invocation.event
        return event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        self._invocation.event = value

    # and the request's context, where Powertools' validation keeps the route and its arguments
    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(self._invocation, "context"):
            self._invocation.context = {}
        context: dict[str, Any] = self._invocation.context
        return context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._invocation.context = value

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        self.current_event = APIGatewayProxyEvent(dict(event))
        return super().resolve(event, context)

    def _convert_matches_into_route_keys(self, match: Match[str]) -> dict[str, str]:
        # API Gateway (REST) gives the path as the client encoded it, and the route is matched on
        # it, a segment each parameter: a parameter's value is what it encodes (p%201029 names
        # "p 1029"). The local gateway gives its path encoded too. Not UTF-8: U+FFFD, which no
        # name takes
        return {name: unquote(value) for name, value in match.groupdict().items()}

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = r"^{}/*\Z") -> Pattern[str]:
        # \Z where Powertools' REST resolver ends a route in $, which matches before a final
        # newline too: /v1/leaderboards/%0A was the boards' listing
        compiled: Pattern[str] = super(APIGatewayRestResolver, APIGatewayRestResolver)._compile_regex(
            rule, r"^{}/*\Z")
        return compiled


def declared_only(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """A request's query parameters are those its route's signature declares: any other, or one
    given twice, is refused rather than silently ignored (a misspelt one of a write would let the
    write go ahead without it)."""
    _check_declared(app)
    return next_middleware(app)


def _check_declared(app: APIGatewayRestResolver) -> None:
    route: Route | None = app.context.get("_route")
    # Powertools runs the middlewares for a request no route takes too, through a route of its own
    # (its not_found_handler): that request is not found, whatever its query
    if route is not None and route.func.__name__ != "not_found_handler":
        event = app.current_event
        # a sample or hand-made event may carry only the single-valued map
        given = event.multi_value_query_string_parameters or {
            name: [value] for name, value in (event.query_string_parameters or {}).items()
        }
        check_names(given, _query_names(route))


def _query_names(route: Route) -> frozenset[str]:
    """The names a route's query takes: a parameter's own, and each field's of a model taken as
    query parameters (crashes.reporting.ReportFilters)."""
    names: set[str] = set()
    for field in route.dependant.query_params:
        model = field.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names |= {info.alias or name for name, info in model.model_fields.items()}
        else:
            names.add(field.alias)
    return frozenset(names)


# the most of a parameter's name a refusal repeats
MAX_NAMED_CHARS = 64


def check_names(given: Mapping[str, Sequence[str]], accepted: frozenset[str]) -> None:
    """The error names the first offending parameter in sorted order, whatever order they came in."""
    unknown = sorted(set(given) - accepted)
    if unknown:
        takes = f"it takes {', '.join(sorted(accepted))}" if accepted else "it takes none"
        # named within a bound: a client's name may be as long as a URL
        name = cut(unknown[0], MAX_NAMED_CHARS)
        raise InvalidField(f"{name} is not a query parameter of this route; {takes}", name)
    repeated = sorted(name for name, values in given.items() if len(values) > 1)
    if repeated:
        raise InvalidField(f"{repeated[0]} is given {len(given[repeated[0]])} times; give it once", repeated[0])


def create_resolver(typed: bool = True) -> APIGatewayRestResolver:
    """Typed: routes are validated from their signatures (typed query and path parameters,
    Powertools' OpenAPI validation), and a query parameter its route does not declare is refused.
    Capture, the hot path, has no GET and parses its bodies itself: it is not typed, which spares
    it about 40 µs of validation a request and 2 µs of middleware."""
    app = _PerThreadResolver(enable_validation=typed)

    def domain_error(error: BlackboxError) -> Response[str]:
        if isinstance(error, StoreUnavailable):  # the engine's own words are for the log, not the client
            logger.warning("a store did not answer", extra={"port": error.port, "error": repr(error.__cause__)})
        return error_response(error)

    def no_route(_: Exception) -> Response[str]:
        event = app.current_event
        return error_response(NotFound(f"no route for {event.http_method} {event.path}"))

    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        return json_response(500, {"error": "internal", "message": f"unexpected {type(error).__name__}"})

    def invalid_request(error: RequestValidationError) -> Response[str]:
        # Powertools validates before any middleware runs: a parameter the route does not take is
        # still the one named, whatever else is wrong
        try:
            _check_declared(app)
        except BlackboxError as undeclared:
            return error_response(undeclared)
        # its loc starts with where the value was: query, path or body
        first = error.errors()[0]
        return error_response(contract_error({**first, "loc": tuple(first["loc"])[1:]}))

    # registered by call: Powertools' decorators are untyped
    app.exception_handler(RequestValidationError)(invalid_request)
    app.exception_handler(BlackboxError)(domain_error)
    app.not_found(no_route)
    app.exception_handler(Exception)(unexpected)
    if typed:
        app.use([declared_only])
    return app


def idempotency_key(event: APIGatewayProxyEvent) -> str | None:
    """The request's Idempotency-Key header, if it has one: a retry sends the same. Given twice
    it is refused, not the last one taken (a retry sending both would be another request)."""
    key = event.headers.get("idempotency-key")
    if key is not None and len(_header_lines(event, "idempotency-key")) > 1:
        raise InvalidField("Idempotency-Key is given more than once; give it once", "Idempotency-Key")
    if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidField(f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters", "Idempotency-Key")
    return key


def _header_lines(event: APIGatewayProxyEvent, name: str) -> list[str]:
    """Every line of a header (`name` in lower case), as sent."""
    # the raw map: Powertools' own is case-insensitive, and keeps one spelling's values of a name
    sent = event.raw_event.get("multiValueHeaders") or {}
    return [value for spelt, values in sent.items() if spelt.lower() == name for value in values or ()]


def caller_key_id(event: APIGatewayProxyEvent) -> str | None:
    """The id of the API key the caller presented, as API Gateway (and the local gateway) names it;
    an event without an identity is a caller without a key."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    key_id = identity.get("apiKeyId")
    return key_id if isinstance(key_id, str) else None


def caller_arn(event: APIGatewayProxyEvent) -> str | None:
    """The IAM principal that signed the request (SigV4), as API Gateway names it; None for a
    request no one signed."""
    identity = (event.get("requestContext") or {}).get("identity") or {}
    arn = identity.get("userArn")
    return arn if isinstance(arn, str) and arn else None


def posted(event: APIGatewayProxyEvent, *, decodes: bool = False) -> Posted:
    """The body as sent, within the contract's limit. A route that does not undo a Content-Encoding
    itself (`decodes`: reporters.encoding) refuses any but identity: 415, not bytes read as JSON."""
    # API Gateway's `headers` keeps a header's last line only
    lines = _header_lines(event, "content-encoding")
    coding = ", ".join(lines) if lines else event.headers.get("content-encoding")
    if not decodes and coding is not None and coding.strip().lower() not in ("", "identity"):
        raise UnsupportedMediaType(f"Content-Encoding {coding!r} is not taken here: send the body as it is "
                                   "(identity)")
    body = event.body or ""
    try:
        raw = (pybase64.b64decode(body, validate=True) if event.is_base64_encoded
               else body.encode("utf-8", "surrogatepass"))
    except (binascii.Error, ValueError):
        raise MalformedRequest("the body is said to be base64 (isBase64Encoded) and is not") from None
    # the contract's limit as sent: `blackbox serve` stops reading there, API Gateway lets 10 MB through
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    key = idempotency_key(event)
    content_type = event.headers.get("content-type")
    # a cross-site form or a fetch without CORS can post a body with no type, never with this one
    if content_type is None:
        raise UnsupportedMediaType("a body needs a Content-Type (application/json on the /v1 routes)")
    return Posted(raw, content_type, key, coding)

