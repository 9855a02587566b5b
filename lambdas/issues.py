"""Crash groups as issues (a group's page, its state set with a server key), how they are grouped
(a sku's rules, merges, a reprocessing), the webhooks their alerts go to, and the history of a
sku's alerts."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.params import DIGITS, Cursor, From, Sku, To
from api.requests import JsonBody
from api.resolver import answer, caller_arn, caller_key_id, create_resolver, error_answer, json_response, posted
from crashes.alert_history import DEFAULT_DAYS, MAX_HISTORY, AlertHistory, alert_history
from crashes.grouping import (
    GROUPING_TTL_MS,
    MAX_GLOB_CHARS,
    MAX_RULES,
    REGROUP_PAGE,
    MergeBody,
    Reprocessing,
    RulesBody,
    RulesView,
    grouping_rules,
    merge_groups,
    reprocess,
    set_rules,
)
from crashes.issues import SIGNATURE_PATTERN, CrashIssue, StateBody, change_state, crash_issue
from ports.telemetry import instrumented
from ports.timeutil import now_ms
from webhooks import endpoints
from webhooks.delivery import SIGNATURE_HEADER
from webhooks.endpoints import (
    MAX_DELIVERIES,
    MAX_WEBHOOKS,
    NAME_PATTERN,
    DeliveryPage,
    WebhookBody,
    WebhookList,
    WebhookView,
)

app = create_resolver()
STATE = JsonBody(StateBody)
RULES = JsonBody(RulesBody)
MERGE = JsonBody(MergeBody)
WEBHOOK = JsonBody(WebhookBody)
Signature = Annotated[str, Path(pattern=SIGNATURE_PATTERN, description=(
    "the group's signature as GET /v1/crash-groups and the reports give it: a hex digest, safe in a path"))]
Name = Annotated[str, Path(pattern=NAME_PATTERN, description="1 to 64 of A-Z a-z 0-9 . _ -, not . or ..")]
# who set a state: the caller's key by its id (API Gateway's; a local key's), the IAM principal that
# signed it (AWS signs these routes), else the server itself
NO_KEY = "server"
# what the changed_by and merged_by columns hold: a longer ARN keeps its end, the role and session
BY_CHARS = 128


@app.get("/v1/crash-groups/<signature>", operation_id="getCrashGroup", summary="A crash group as an issue",
         description=(
             "Its state (unresolved, resolved, ignored, regressed), when and by whom it was set, its last changes, "
             "and its reports within retention by build, newest build first (by build order: runs of digits as "
             "numbers). firstSeen is the first report the consumer saw of it, kept past retention. players: the "
             "distinct playerIds of its reports within retention, in all and by build"),
         responses={200: answer(CrashIssue, "the group")})
def get_group(signature: Signature, sku: Sku) -> Response[str]:
    return json_response(200, crash_issue(current().issues, sku, signature))


@app.put("/v1/crash-groups/<signature>/state", operation_id="setCrashGroupState",
         summary="Resolve, ignore or reopen a crash group",
         description=(
             "needs a server key. resolved, optionally inBuild: a report received later of that build or a later "
             "one (by build order; any build when none is given) regresses it, and the webhooks taking "
             "`regressed` are told once. ignored: forever, until ignoreUntil (a time to come), or until "
             "ignoreForReports more reports, whichever comes first; then it is unresolved again"),
         openapi_extensions=STATE.openapi, responses={200: answer(CrashIssue, "the group with its new state")})
def put_group_state(signature: Signature, sku: Sku) -> Response[str]:
    return json_response(200, change_state(current().issues, sku, signature, STATE.one(posted(app.current_event)),
                                           by=_caller(), now=now_ms()))


def _caller() -> str:
    signer = caller_arn(app.current_event)
    if signer is not None and len(signer) > BY_CHARS:
        signer = "…" + signer[1 - BY_CHARS:]
    return caller_key_id(app.current_event) or signer or NO_KEY


@app.post("/v1/crash-groups/<signature>/merge", operation_id="mergeCrashGroup",
          summary="Merge a crash group into another",
          description=(
              "needs a server key. From now on the group's reports are counted in `into`: new ones are grouped "
              "there, and those indexed already move there shortly (a reprocessing of this signature's reports). "
              "The group keeps its state and history, and says mergedInto; the groups merged into it follow it. "
              "Merging into a merged group merges into the group that one is counted in. Again: the same answer. "
              "400 into itself, 404 when either group has no issue, 409 when it is merged into another group "
              "already or `into` is counted in it (a cycle)"),
          openapi_extensions=MERGE.openapi,
          responses={200: answer(CrashIssue, "the merged group"),
                     409: error_answer("conflict: the group is merged into another already, or `into` is counted "
                                       "in it (a cycle)")})
def merge_group(signature: Signature, sku: Sku) -> Response[str]:
    a = current()
    return json_response(200, merge_groups(a.issues, a.log, a.spill, sku, signature,
                                           body=MERGE.one(posted(app.current_event)), by=_caller(), now=now_ms()))


@app.get("/v1/crash-groups:rules", operation_id="getCrashGroupingRules", summary="A sku's grouping rules",
         description="the frames its signatures skip and join; version 0 and empty lists before any were set",
         responses={200: answer(RulesView, "the rules")})
def get_rules(sku: Sku) -> Response[str]:
    return json_response(200, grouping_rules(current().issues, sku))


@app.put("/v1/crash-groups:rules", operation_id="putCrashGroupingRules", summary="Set a sku's grouping rules",
         description=(
             f"needs a server key. Up to {MAX_RULES} globs a list, each up to {MAX_GLOB_CHARS} characters (`*`, `?` "
             "and `[...]` as in fnmatch, matched case-sensitively against a whole frame as the signature normalises "
             "it: no address, offset or line). A frame of the crash handler is always skipped; after `skip`, a frame "
             "a `join` glob matches takes the next frame into its element of the signature. New reports are "
             f"grouped by them within {GROUPING_TTL_MS // 1000} s; POST /v1/crash-groups:reprocess groups the past "
             "ones. A group's signature changes with the frames that make it: merges name signatures as grouped "
             "when they were made"),
         openapi_extensions=RULES.openapi, responses={200: answer(RulesView, "the rules, with their new version")})
def put_rules(sku: Sku) -> Response[str]:
    return json_response(200, set_rules(current().issues, sku, RULES.one(posted(app.current_event)), by=_caller(),
                                        now=now_ms()))


@app.post("/v1/crash-groups:reprocess", operation_id="reprocessCrashGroups",
          summary="Group a sku's past reports again, by its rules and merges now",
          description=(
              f"needs a server key. Done in the background, {REGROUP_PAGE} reports at a time: each report's "
              "signature is computed again from its stack trace as submitted (a report with a walked minidump is "
              "walked again), and nothing else of it changes. A group new to the sku gets an issue without an "
              "alert; a group's firstSeen moves to an earlier report it gains. Asking again is harmless"),
          responses={202: answer(Reprocessing, "asked for")})
def post_reprocess(sku: Sku) -> Response[str]:
    a = current()
    return json_response(202, reprocess(a.issues, a.log, a.spill, sku))


@app.get("/v1/webhooks", operation_id="listWebhooks", summary="The webhooks, by name",
         description="needs a server key; secrets are never read back", responses={200: answer(WebhookList, "all")})
def list_webhooks() -> Response[str]:
    return json_response(200, endpoints.listing(current().issues))


@app.put("/v1/webhooks/<name>", operation_id="putWebhook", summary="Register or replace a webhook",
         description=(
             "needs a server key. Each alert of the kinds named is POSTed once to the URL as JSON with a `text` "
             f"(Slack's incoming webhooks take it as it is), signed in `{SIGNATURE_HEADER}: t=<unix seconds>,"
             "v1=<hex HMAC-SHA256 of \"<t>.<body>\" with the secret>`; a failure is retried with exponential "
             "backoff. The URL must be http or https, and (unless BLACKBOX_WEBHOOKS__ALLOW_PRIVATE) reach a "
             "public address"),
         openapi_extensions=WEBHOOK.openapi,
         responses={200: answer(WebhookView, "replaced"), 201: answer(WebhookView, "created"),
                    409: error_answer(f"conflict: a new webhook where {MAX_WEBHOOKS:,} are held")})
def put_webhook(name: Name) -> Response[str]:
    a = current()
    created, view = endpoints.put(a.issues, a.settings.webhooks, name, WEBHOOK.one(posted(app.current_event)),
                                  now_ms())
    return json_response(201 if created else 200, view)


@app.delete("/v1/webhooks/<name>", operation_id="deleteWebhook", summary="Delete a webhook and its deliveries",
            description="needs a server key; 404 when there is none", responses={204: {"description": "deleted"}})
def delete_webhook(name: Name) -> Response[str]:
    endpoints.delete(current().issues, name)
    return Response(status_code=204, body="")


@app.get("/v1/webhooks/<name>/deliveries", operation_id="listWebhookDeliveries",
         summary="A webhook's deliveries, last changed first",
         description="needs a server key; each alert's delivery with its status (pending, delivered, failed after "
                     "the last attempt), attempts and last answer",
         responses={200: answer(DeliveryPage, "a page of deliveries")})
def list_deliveries(name: Name, limit: Annotated[int, Query(ge=1, le=MAX_DELIVERIES), DIGITS] = 20,
                    cursor: Cursor = None) -> Response[str]:
    return json_response(200, endpoints.deliveries(current().issues, name, limit=limit, cursor=cursor))


@app.get("/v1/alerts/history", operation_id="getAlertHistory", summary="The alerts raised for a sku, newest first",
         description=(
             "Raised in [from, to) (by default the last "
             f"{DEFAULT_DAYS} days): new-group, regressed, velocity and crash-free-drop alerts (a season end is a "
             "board's, in its webhooks' deliveries), each with what it names (signature, build), when it opened "
             "and, for velocity and crash-free-drop episodes, closed (null while the condition holds, and for "
             "the other kinds), its delivery to each webhook that took its kind, and the alert as they got it. "
             "GET /v1/alerts gives the crash spikes, recomputed from the index. A page stops at about 4 MB as "
             "Lambda carries the answer, so it may hold fewer than limit: follow nextCursor"),
         responses={200: answer(AlertHistory, "a page of alerts")})
def get_alert_history(sku: Sku, from_: From = None, to: To = None,
                      limit: Annotated[int, Query(ge=1, le=MAX_HISTORY), DIGITS] = 20,
                      cursor: Cursor = None) -> Response[str]:
    return json_response(200, alert_history(current().issues, sku, from_ms=from_, to_ms=to, limit=limit,
                                            cursor=cursor))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
