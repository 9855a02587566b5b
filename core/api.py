"""What every API handler shares: a Powertools resolver whose errors are the contract's."""

from __future__ import annotations

import base64
import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from core.errors import BlackboxError, NotFound
from core.requests import Posted

logger = Logger(service="blackbox")


def json_response(status: int, body: Any) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


def error_response(error: BlackboxError) -> Response[str]:
    return json_response(error.status, error.body())


def create_resolver() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()

    def domain_error(error: BlackboxError) -> Response[str]:
        return error_response(error)

    def no_route(_: Exception) -> Response[str]:
        event = app.current_event
        return error_response(NotFound(f"no route for {event.http_method} {event.path}"))

    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        return json_response(500, {"error": "internal", "message": f"unexpected {type(error).__name__}"})

    # registered by call: Powertools' decorators are untyped
    app.exception_handler(BlackboxError)(domain_error)
    app.not_found(no_route)
    app.exception_handler(Exception)(unexpected)
    return app


def posted(event: APIGatewayProxyEvent) -> Posted:
    body = event.body or ""
    raw = base64.b64decode(body) if event.is_base64_encoded else body.encode("utf-8", "surrogatepass")
    return Posted(raw, event.headers.get("content-type"), event.headers.get("idempotency-key"))

