"""Native crash reporters' uploads, unchanged clients: Sentry SDKs' envelopes and store bodies,
Crashpad's and Breakpad's minidump uploads (Sentry's route and Socorro's `/submit`) and Unreal's
CrashReportClient. Each answers as its client expects once what it carried is durable (rule 1
of docs/architecture.md), through the capture path."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from adapters.factory import current
from api.requests import BODY_EXTENSION
from api.resolver import answer, caller_key_id, check_names, create_resolver, json_response, posted, text_response
from ports.errors import InvalidField, NotFound
from ports.limits import MAX_BODY_BYTES
from ports.scopes import SkuScope
from ports.telemetry import instrumented
from reporters.breakpad import parse_minidump_upload, socorro_answer
from reporters.capture import Captured, capture_envelope
from reporters.encoding import decode_body
from reporters.projects import MAX_PROJECT_ID, unknown_project
from reporters.sentry import SentryEnvelope, check_protocol, find_auth, parse_envelope, parse_store
from reporters.unreal import parse_unreal_crash

# the hot path's choice (lambdas.capture): each route reads its body itself
app = create_resolver(typed=False)

PROJECT_PATTERN = r"^[1-9][0-9]{0,15}$"
ProjectId = Annotated[str, Path(pattern=PROJECT_PATTERN, description="the project of the DSN")]
# (body, its Content-Type, the project's sku) → what the upload carried
Reader = Callable[[bytes, str | None, str], SentryEnvelope]


@with_config(ConfigDict(extra="forbid"))
class SentryAnswer(TypedDict, total=False):
    """What Relay answers: the event's id, when the upload held one."""

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


def _sku(project_id: str | None, scope: SkuScope) -> str:
    """The project's sku. Another title's project is unknown to a title key, as a free id is: a key
    that ships in a game must not tell which ids are taken, nor by which skus."""
    number = int(project_id) if project_id and re.fullmatch(PROJECT_PATTERN, project_id, re.ASCII) else 0
    if not 1 <= number <= MAX_PROJECT_ID:
        raise NotFound(f"no project {project_id[:32]}" if project_id
                       else "the upload names no project: add ?project=<id> to the URL", "project")
    sku = current().project_skus.of(number)
    if not scope.allows(sku):
        raise unknown_project(number)
    return sku


def _capture(project_id: str | None, read: Reader, *, sentry_auth: bool = True) -> Captured | None:
    """Captures the request's upload for the project's sku; its report's ids, if it had one.
    `sentry_auth`: the request authenticates as a Sentry SDK does, whose protocol is checked."""
    a = current()
    event = app.current_event
    # in AWS the key source found the key; serve's gateway checked it all, and hands no handler the
    # headers that carry it
    if sentry_auth and (auth := find_auth(event.multi_value_headers, event.multi_value_query_string_parameters or {})):
        check_protocol(auth)
    scope = SkuScope.of(caller_key_id(event), a.key_skus)
    sku = _sku(project_id, scope)  # before a byte of the body is read
    request = posted(app.current_event, decodes=True)  # within the contract's limit as sent; then as decoded
    body = decode_body(request.body, request.content_encoding, MAX_BODY_BYTES)
    reading = read(body, request.content_type, sku)
    return capture_envelope(a.log, a.spill, reading, sku, scope=scope)


_SENTRY_AUTH = ("auth by `X-Sentry-Auth`, `Authorization: Sentry` or `?sentry_key=` (an ingest key); "
                "`Content-Encoding` identity, gzip, deflate or br; at most 1 MiB as sent and as decoded. The "
                "contract's errors")
_UNKNOWN = "an unknown project is 404"
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_MINIDUMP_FORM = {"multipart/form-data": {"schema": {
    "type": "object", "required": ["upload_file_minidump"],
    "properties": {"upload_file_minidump": {"type": "string", "format": "binary"}},
    "description": "the minidump (MDMP and its version) and the reporter's annotations as text fields; other files "
                   "are attachments"}}}


def _body(content: dict[str, Any]) -> dict[str, Any]:
    return {BODY_EXTENSION: {"required": True, "content": content}}


def _text(description: str) -> dict[int, OpenAPIResponse]:
    return {200: {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}}


def _sentry_route(path: str, operation_id: str, summary: str, body: dict[str, Any], read: Reader) -> None:
    def upload(project_id: ProjectId) -> Response[str]:
        captured = _capture(project_id, read)
        return json_response(200, SentryAnswer(id=captured.sentry_id) if captured else SentryAnswer())

    app.post(path, operation_id=operation_id, summary=summary, description="as a Sentry SDK sends it (any "
             f"Content-Type, but one): {_SENTRY_AUTH}; {_UNKNOWN}", openapi_extensions=_body(body),
             responses={200: answer(SentryAnswer, "durable")})(upload)


_sentry_route("/api/<project_id>/envelope/", "postSentryEnvelope",
              "A Sentry SDK's envelope (200 once what it carries is durable)",
              {"application/x-sentry-envelope": _BINARY}, lambda body, _, sku: parse_envelope(body, sku))
_sentry_route("/api/<project_id>/store/", "postSentryEvent", "An older Sentry SDK's event (200 once it is durable)",
              {"application/json": {"schema": {"type": "object", "description": "a Sentry event"}}},
              lambda body, _, sku: parse_store(body, sku))


@app.post("/api/<project_id>/minidump/", operation_id="postMinidump",
          summary="A Crashpad or Breakpad minidump upload (200 once it is durable)",
          description="as Crashpad sends it to Sentry (multipart `upload_file_minidump` and annotations, or the "
                      f"bare dump), the whole body perhaps gzipped: {_SENTRY_AUTH}; {_UNKNOWN}. Answers Sentry's "
                      "event id as text (32 hex digits, not the report's eventId)",
          openapi_extensions=_body({**_MINIDUMP_FORM, "application/octet-stream": _BINARY}),
          responses=_text("Sentry's event id"))
def post_minidump(project_id: ProjectId) -> Response[str]:
    captured = _capture(project_id, parse_minidump_upload)
    return text_response(200, captured.sentry_id if captured else "")


@app.post("/submit", operation_id="postBreakpadSubmit",
          summary="A Breakpad upload as Socorro takes it (200 once it is durable)",
          description="for Breakpad clients, which take any upload URL: `/submit?project=<project>&sentry_key="
                      "<ingest key>`, multipart as on the minidump route; "
                      f"{_SENTRY_AUTH}; an unknown or missing project, or one given twice, is 400 naming "
                      "`project`. Answers `CrashID=bp-<event id>` as Socorro does",
          openapi_extensions=_body(_MINIDUMP_FORM), responses=_text("`CrashID=bp-<uuid>`"))
def post_submit(project: Annotated[str | None, Query(pattern=PROJECT_PATTERN, description="the project")] = None,
                ) -> Response[str]:
    # untyped routes are handed their path alone: the query is read here; a project it does not name
    # is a value of the query, refused as one
    # once, as a typed route's parameters: a proxy in front may read the first where the last is read here
    check_names({"project": (app.current_event.multi_value_query_string_parameters or {}).get("project") or []},
                frozenset({"project"}))
    try:
        captured = _capture(app.current_event.get_query_string_value("project"), parse_minidump_upload)
    except NotFound as missing:
        raise InvalidField(str(missing), "project") from None
    return text_response(200, socorro_answer(captured.sentry_id) if captured else "")


@app.post("/api/<project_id>/unreal/<key>/", operation_id="postUnrealCrash",
          summary="Unreal's CrashReportClient upload (200 once it is durable)",
          description="its compressed crash container (context XML, minidump, logs), as CrashReportClient posts it "
                      "to a DataRouterUrl of `…/api/<project>/unreal/<ingest key>/`; at most 1 MiB as sent and "
                      f"inflated; {_UNKNOWN}. Answers the report's eventId as text",
          openapi_extensions=_body({"application/octet-stream": _BINARY}), responses=_text("the report's eventId"))
def post_unreal(project_id: ProjectId,
                key: Annotated[str, Path(description="an ingest key, where CrashReportClient can put one")],
                ) -> Response[str]:
    # CrashReportClient reads no answer: the report's eventId, which a studio finds the report by
    captured = _capture(project_id, lambda body, _, sku: parse_unreal_crash(body, sku), sentry_auth=False)
    return text_response(200, captured.event_id if captured else "")


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
