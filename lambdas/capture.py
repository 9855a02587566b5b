"""Capture: POST /v1/crashes, /v1/sessions and /v1/scores. Answers 202 once the event is durable."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from adapters.factory import current
from api.access import require_server_key
from api.requests import JsonBody, Posted
from api.resolver import answer, caller_key_id, create_resolver, json_response, posted
from crashes.capture import Receipt, capture_crash
from crashes.model import CrashSubmission
from ports import EventLog, SpillStore
from ports.scopes import ANY_SKU, SkuScope
from ports.telemetry import instrumented
from ranking import model as scores_model
from ranking.capture import capture_scores
from sessions import model as sessions_model
from sessions.capture import capture_sessions


@with_config(ConfigDict(extra="forbid"))
class CrashReceipt(TypedDict):
    eventId: Annotated[str, Field(json_schema_extra={"format": "uuid"})]
    reportKey: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


@with_config(ConfigDict(extra="forbid"))
class Accepted(TypedDict):
    accepted: Annotated[int, Field(ge=0, le=max(sessions_model.MAX_BATCH, scores_model.MAX_BATCH))]


# the hot path: each route parses its body itself, strictly (see create_resolver)
app = create_resolver(typed=False)


# what each route takes: each parses its body with these, and the document says them
CRASH = JsonBody(CrashSubmission)
SESSIONS = JsonBody(sessions_model.SessionEvent, batch=sessions_model.MAX_BATCH)
SCORES = JsonBody(scores_model.Score, batch=scores_model.MAX_BATCH)


def crash(log: EventLog, spill: SpillStore, body: Posted, scope: SkuScope = ANY_SKU) -> Receipt:
    """A crash report as posted, parsed here, at the edge, for the domain."""
    return capture_crash(log, spill, CRASH.one(body), body.json_text, idempotency_key=body.idempotency_key,
                         scope=scope)


def sessions(log: EventLog, spill: SpillStore, body: Posted, scope: SkuScope = ANY_SKU) -> int:
    return capture_sessions(log, spill, SESSIONS.many(body), idempotency_key=body.idempotency_key, scope=scope)


def scores(log: EventLog, spill: SpillStore, body: Posted) -> int:
    return capture_scores(log, spill, SCORES.many(body), idempotency_key=body.idempotency_key)


def _scope() -> SkuScope:
    """What the caller's key may post: a title key only its own skus."""
    key_id = caller_key_id(app.current_event)
    return SkuScope.of(key_id, current().key_skus)


@app.post("/v1/crashes", operation_id="postCrash", summary="Submit a crash report (202 once it is durable)",
          openapi_extensions=CRASH.openapi, responses={202: answer(CrashReceipt, "durable; queryable within a second")})
def post_crash() -> Response[str]:
    a = current()
    receipt = crash(a.log, a.spill, posted(app.current_event), _scope())
    return json_response(202, CrashReceipt(eventId=receipt.event_id, reportKey=receipt.report_key))


@app.post("/v1/sessions", operation_id="postSessions", summary="Count sessions (202 once they are durable)",
          openapi_extensions=SESSIONS.openapi, responses={202: answer(Accepted, "durable")})
def post_sessions() -> Response[str]:
    a = current()
    return json_response(202, Accepted(accepted=sessions(a.log, a.spill, posted(app.current_event), _scope())))


@app.post("/v1/scores", operation_id="postScores", summary="Post scores (202 once they are durable)",
          description="needs a server key", openapi_extensions=SCORES.openapi,
          responses={202: answer(Accepted, "durable")})
def post_scores() -> Response[str]:
    a = current()
    require_server_key(caller_key_id(app.current_event), a.settings.server_key_ids)
    return json_response(202, Accepted(accepted=scores(a.log, a.spill, posted(app.current_event))))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
