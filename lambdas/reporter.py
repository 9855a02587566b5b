"""Reporter: the crash query API and health. Each route's signature is its part of the contract:
the query parameters it takes, typed and bounded; any other is refused (api.resolver.declared_only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponseContentSchema
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from adapters.factory import current
from api.params import DIGITS, Cursor, From, Sku, To
from api.resolver import DOWNLOAD_POLICY, EVERY_ANSWER, answer, create_resolver, download_response, json_response
from crashes.groups import MAX_GROUPS, Groups, crash_groups
from crashes.releases import (
    MAX_BUILDS,
    MAX_WINDOW_DAYS,
    BuildPage,
    Interval,
    ReleaseHealth,
    list_builds,
    release_health,
)
from crashes.reporting import (
    MAX_LIMIT,
    MAX_OFFSET,
    Fields,
    Order,
    Report,
    ReportFilters,
    ReportListFilters,
    ReportPage,
    ReportQuery,
    get_attachment,
    get_report,
    list_reports,
)
from crashes.skus import MAX_LIMIT as MAX_SKUS
from crashes.skus import SkuPage, list_skus
from crashes.spikes import Alerts, list_alerts
from crashes.stats import MAX_BUCKETS, Granularity, Stats, crash_stats
from ports.releases import EXACT_PLAYERS, SKETCH_ERROR
from ports.telemetry import instrumented

app = create_resolver()


@with_config(ConfigDict(extra="forbid"))
class Health(TypedDict):
    status: Literal["ok", "unavailable"]
    components: dict[str, str]


_BINARY: OpenAPIResponseContentSchema = {"schema": {"type": "string", "format": "binary"}}


@app.get("/v1/crashes", operation_id="listCrashes",
         summary="Crash reports of a sku by reportId, oldest or newest first",
         responses={200: answer(ReportPage, "a page of reports")})
def crashes(
    *, sku: Sku, from_: From = None, to: To = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT), DIGITS] = 100,
    cursor: Annotated[str | None, Query(description=(
        "nextCursor of the previous page, asked for with the same order (not with offset). Pages go on by "
        "reportId, so a report indexed meanwhile is neither skipped nor listed twice (newest first, it is on "
        "a first page asked for again)"))] = None,
    offset: Annotated[int | None, Query(ge=0, le=MAX_OFFSET, description=(
                          "reports to skip; not with cursor. A page may hold fewer than limit (its bytes): the next "
                          "page's offset adds the reports answered, not limit")),
                      DIGITS] = None,
    order: Annotated[Order, Query(description=(
        "asc, oldest first; desc, newest first (by reportId, the order reports became readable)"))] = "asc",
    fields: Annotated[Fields, Query(description=(
        "full adds each report's payload; a page, either way, stops at about 4 MB of reports as Lambda "
        "carries the answer (its JSON, non-ASCII escaped, as a JSON string: \" and \\ escaped again; API "
        "Gateway and Lambda answer at most 6 MB), or at one, so it may hold fewer than limit: follow "
        "nextCursor"))] = "summary",
    narrowed: Annotated[ReportListFilters, Query()],
) -> Response[str]:
    a = current()
    query = ReportQuery(sku=sku, limit=limit, from_ms=from_, to_ms=to, cursor=cursor, offset=offset, order=order,
                        fields=fields, equals=narrowed.equals())
    return json_response(200, list_reports(a.index, a.documents, query))


@app.get("/v1/crashes/<report_id>", operation_id="getCrash", responses={200: answer(Report, "the full report")})
def crash(report_id: str) -> Response[str]:
    a = current()
    return json_response(200, get_report(a.index, a.documents, report_id))


# bytes: Powertools' response validation would encode them as text
@app.get("/v1/crashes/<report_id>/attachments/<name>", enable_validation=False, operation_id="getAttachment",
         responses={200: {
             "description": (
                 "the attachment's bytes as a download, never as a page: image/png, image/jpeg, image/gif or "
                 "image/webp for a name ending .png, .jpg, .jpeg, .gif or .webp (screenshots show), "
                 "application/octet-stream for any other"),
             "headers": {
                 "Content-Disposition": {"description": "attachment, with the name (RFC 6266; filename* when it "
                                                        "is not ASCII or holds a %)", "schema": {"type": "string"}},
                 "Content-Security-Policy": {"description": DOWNLOAD_POLICY, "schema": {"type": "string"}},
                 **{name: {"schema": {"type": "string", "enum": [value]}} for name, value in EVERY_ANSWER.items()},
             },
             "content": {kind: _BINARY for kind in (
                 "application/octet-stream", "image/png", "image/jpeg", "image/gif", "image/webp")},
         }})
def attachment(report_id: str, name: str) -> Response[bytes]:
    a = current()
    data, content_type = get_attachment(a.index, a.documents, report_id, name)
    return download_response(data, content_type, name)


@app.get("/v1/stats", operation_id="getStats", summary="Sessions, crashes and crash rate per minute or hour",
         description="The report filters given (all must match) narrow the crashes. Sessions carry no platform, "
                     "build or crash type: they are the whole sku's, and with a filter crashRate is null. At most "
                     f"{MAX_BUCKETS:,} buckets (400 past them)",
         responses={200: answer(Stats, "one bucket per minute or hour of the range")})
def stats(
    *, sku: Sku, from_: From = None, to: To = None,
    granularity: Annotated[Granularity, Query(description="one bucket a minute or an hour")] = "minute",
    narrowed: Annotated[ReportFilters, Query()],
) -> Response[str]:
    a = current()
    return json_response(200, crash_stats(a.index, a.counters, sku, from_ms=from_, to_ms=to, granularity=granularity,
                                          equals=narrowed.equals()))


@app.get("/v1/crash-groups", operation_id="getCrashGroups", summary="Reports grouped by signature, largest first",
         description="Reports received in [from, to) (by default the last day), narrowed by the report filters "
                     "given (all must match); count, firstSeen, lastSeen and the sample are those of the reports "
                     "that match",
         responses={200: answer(Groups, "the groups")})
def groups(
    *, sku: Sku, from_: From = None, to: To = None, limit: Annotated[int, Query(ge=1, le=MAX_GROUPS), DIGITS] = 20,
    narrowed: Annotated[ReportFilters, Query()],
) -> Response[str]:
    a = current()
    return json_response(200, crash_groups(a.index, a.documents, sku, from_ms=from_, to_ms=to, limit=limit,
                                           equals=narrowed.equals(), rules=a.issues.grouping(sku).rules))


@app.get("/v1/skus", operation_id="listSkus", summary="The skus that have crash reports or sessions, by name",
         description="Each with when it last had a crash (receivedAt) and a session (the start of its minute), "
                     "null when it never had one within retention. One index lookup a sku, whatever its traffic.",
         responses={200: answer(SkuPage, "a page of skus")})
def skus(limit: Annotated[int, Query(ge=1, le=MAX_SKUS), DIGITS] = 100, cursor: Cursor = None) -> Response[str]:
    a = current()
    return json_response(200, list_skus(a.index, a.counters, limit=limit, cursor=cursor))


@app.get("/v1/alerts", operation_id="getAlerts", summary="Minutes whose crashes spiked over the trailing baseline",
         description="Each minute that overlaps [from, to) (by default the last hour), its crashes counted whole: "
                     "the minutes from and to fall in count those received before from and after to too",
         responses={200: answer(Alerts, "the spikes")})
def alerts(sku: Sku, from_: From = None, to: To = None) -> Response[str]:
    a = current()
    return json_response(200, list_alerts(a.index, a.settings.spikes, sku, from_ms=from_, to_ms=to))


@app.get("/v1/releases", operation_id="listReleases", summary="The builds of a sku, newest first",
         description="Builds that had a session with a buildVersion within retention, by the first minute they had "
                     "one, newest first; of one minute's, the last in build order first",
         responses={200: answer(BuildPage, "a page of builds")})
def releases(sku: Sku, limit: Annotated[int, Query(ge=1, le=MAX_BUILDS), DIGITS] = 20,
             cursor: Cursor = None) -> Response[str]:
    a = current()
    return json_response(200, list_builds(a.counters, sku, limit=limit, cursor=cursor))


@app.get("/v1/releases/<build>", operation_id="getRelease", summary="Release health of one build",
         description=(
             "Over [from, to) in whole buckets of the interval, from `start` (from, rounded down to its hour or UTC "
             f"day) to `end` (to), as answered (by default the last 7 days' whole buckets; at most {MAX_WINDOW_DAYS} "
             "days from `from`): the build's sessions by outcome, adoption (its share of the sku's "
             "sessions), crash-free sessions and players, crashes (reports with this buildVersion) and crash rate, "
             "the same of the build first seen before it and the change against it, and a series per hour or day. "
             "Players are distinct playerIds of the build's sessions over the UTC days the window touches: exact "
             f"while a day of a build has at most {EXACT_PLAYERS} (of each kind), else a HyperLogLog estimate "
             f"(standard error {SKETCH_ERROR:.1%})"),
         responses={200: answer(ReleaseHealth, "the build's health")})
def release(build: str, sku: Sku, from_: From = None, to: To = None,
            interval: Annotated[Interval, Query(description="one series bucket an hour or a day")] = "day",
            ) -> Response[str]:
    a = current()
    return json_response(200, release_health(a.index, a.counters, sku, build, from_ms=from_, to_ms=to,
                                             interval=interval))


@app.get("/v1/health", operation_id="getHealth", description="open under `blackbox serve`; IAM (SigV4) in AWS",
         responses={
    200: answer(Health, "every component answers"), 503: answer(Health, "a component does not answer")})
def health() -> Response[str]:
    a = current()
    components: dict[str, str] = {}
    for name, part in (("log", a.log), ("documents", a.documents), ("index", a.index)):
        try:
            part.ping()
            components[name] = "ok"
        except Exception as exc:
            components[name] = f"unavailable: {type(exc).__name__}"
    healthy = all(state == "ok" for state in components.values())
    body: Health = {"status": "ok" if healthy else "unavailable", "components": components}
    return json_response(200 if healthy else 503, body)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
