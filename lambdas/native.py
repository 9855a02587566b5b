"""Native crash reporters' uploads, unchanged clients: Sentry SDKs' envelopes and store bodies.
Answers as Sentry does once what they carried is durable (DESIGN §3.1), through the capture path."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from adapters.factory import current
from api.requests import BODY_EXTENSION, Posted
from api.resolver import answer, create_resolver, json_response, posted
from ports import ProjectStore
from ports.errors import NotFound
from ports.limits import MAX_BODY_BYTES
from ports.scopes import SkuScope
from ports.telemetry import instrumented
from reporters.capture import capture_envelope
from reporters.encoding import decode_body
from reporters.projects import MAX_PROJECT_ID, Skus
from reporters.sentry import SentryEnvelope, parse_envelope, parse_store

# the hot path's choice (lambdas.capture): each route reads its body itself
app = create_resolver(typed=False)

ProjectId = Annotated[str, Path(pattern=r"^[1-9][0-9]{0,15}$", description="the project of the DSN")]


@with_config(ConfigDict(extra="forbid"))
class SentryAnswer(TypedDict, total=False):
    """What Relay answers: the event's id, when the upload held one."""

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


_skus: weakref.WeakKeyDictionary[ProjectStore, Skus] = weakref.WeakKeyDictionary()
_skus_lock = threading.Lock()


def _sku(project_id: str) -> str:
    number = int(project_id) if project_id.isdigit() and len(project_id) <= 16 else 0
    if not 1 <= number <= MAX_PROJECT_ID:
        raise NotFound(f"no project {project_id[:32]}")
    store = current().projects
    with _skus_lock:
        skus = _skus.get(store) or _skus.setdefault(store, Skus(store))
    return skus.of(number)


def _upload() -> tuple[Posted, bytes]:
    """The request, and its body with its Content-Encoding undone (within the contract's limit)."""
    request = posted(app.current_event)
    return request, decode_body(request.body, app.current_event.headers.get("content-encoding"), MAX_BODY_BYTES)


def _capture(project_id: str, read: Callable[[bytes, str], SentryEnvelope]) -> Response[str]:
    sku = _sku(project_id)
    request, body = _upload()
    reading = read(body, sku)
    a = current()
    scope = SkuScope.of(app.current_event.request_context.identity.api_key_id, a.key_skus)
    event_id = capture_envelope(a.log, a.spill, reading, sku, size_bytes=len(request.body), scope=scope)
    return json_response(200, SentryAnswer(id=event_id) if event_id else SentryAnswer())


_SENTRY = ("as a Sentry SDK sends it (any media type): auth by `X-Sentry-Auth`, `Authorization: Sentry` or "
           "`?sentry_key=` (an ingest key), `Content-Encoding` identity, gzip or deflate; at most 1 MiB as sent "
           "and as decoded. The contract's errors; an unknown project is 404")
_BINARY = {"schema": {"type": "string", "format": "binary"}}
ENVELOPE = {BODY_EXTENSION: {"required": True, "content": {"application/x-sentry-envelope": _BINARY}}}
EVENT = {BODY_EXTENSION: {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "a Sentry event"}}}}}


def _upload_route(path: str, operation_id: str, summary: str, body: dict[str, Any],
                  read: Callable[[bytes, str], SentryEnvelope]) -> None:
    def upload(project_id: ProjectId) -> Response[str]:
        return _capture(project_id, read)

    app.post(path, operation_id=operation_id, summary=summary, description=_SENTRY, openapi_extensions=body,
             responses={200: answer(SentryAnswer, "durable")})(upload)


_upload_route("/api/<project_id>/envelope/", "postSentryEnvelope",
              "A Sentry SDK's envelope (200 once what it carries is durable)", ENVELOPE, parse_envelope)
_upload_route("/api/<project_id>/store/", "postSentryEvent", "An older Sentry SDK's event (200 once it is durable)",
              EVENT, parse_store)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
