"""Capture: POST /v1/crashes, /v1/sessions and /v1/scores. Answers 202 once the event is durable."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.access import require_server_key
from api.requests import Posted, validate, validate_batch
from api.resolver import create_resolver, json_response, posted
from crashes.capture import Receipt, capture_crash
from crashes.model import CrashSubmission
from ports import EventLog, SpillStore
from ports.scopes import ANY_SKU, SkuScope
from ports.telemetry import instrumented
from ranking import model as scores_model
from ranking.capture import capture_scores
from sessions import model as sessions_model
from sessions.capture import capture_sessions

# the hot path: each route parses its body itself, strictly (see create_resolver)
app = create_resolver(typed=False)


def crash(log: EventLog, spill: SpillStore, body: Posted, scope: SkuScope = ANY_SKU) -> Receipt:
    """A crash report as posted, parsed here, at the edge, for the domain."""
    return capture_crash(log, spill, validate(CrashSubmission, body.json()), body.json_text,
                         size_bytes=len(body.body), idempotency_key=body.idempotency_key, scope=scope)


def sessions(log: EventLog, spill: SpillStore, body: Posted, scope: SkuScope = ANY_SKU) -> int:
    events = validate_batch(sessions_model.SessionEvent, body.json(), sessions_model.MAX_BATCH)
    return capture_sessions(log, spill, events, idempotency_key=body.idempotency_key, scope=scope)


def scores(log: EventLog, spill: SpillStore, body: Posted) -> int:
    posted_scores = validate_batch(scores_model.Score, body.json(), scores_model.MAX_BATCH)
    return capture_scores(log, spill, posted_scores, idempotency_key=body.idempotency_key)


def _scope() -> SkuScope:
    """What the caller's key may post: a title key only its own skus."""
    key_id = app.current_event.request_context.identity.api_key_id
    return SkuScope.of(key_id, current().key_skus)


@app.post("/v1/crashes")
def post_crash() -> Response[str]:
    a = current()
    receipt = crash(a.log, a.spill, posted(app.current_event), _scope())
    return json_response(202, {"eventId": receipt.event_id, "reportKey": receipt.report_key})


@app.post("/v1/sessions")
def post_sessions() -> Response[str]:
    a = current()
    return json_response(202, {"accepted": sessions(a.log, a.spill, posted(app.current_event), _scope())})


@app.post("/v1/scores")
def post_scores() -> Response[str]:
    a = current()
    require_server_key(app.current_event.request_context.identity.api_key_id, a.settings.server_key_ids)
    return json_response(202, {"accepted": scores(a.log, a.spill, posted(app.current_event))})


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
