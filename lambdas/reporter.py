"""Reporter: the crash query API and health. Each route's signature is its part of the contract:
the query parameters it takes, typed and bounded; any other is refused (api.resolver.declared_only)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.params import DIGITS, BuildVersion, CrashType, Cursor, ErrorCode, From, Platform, Signature, Sku, To
from api.resolver import create_resolver, download_response, json_response
from crashes.groups import MAX_GROUPS, crash_groups
from crashes.reporting import (
    MAX_LIMIT,
    MAX_OFFSET,
    Fields,
    Order,
    ReportQuery,
    get_attachment,
    get_report,
    list_reports,
    narrowing,
)
from crashes.skus import MAX_LIMIT as MAX_SKUS
from crashes.skus import list_skus
from crashes.spikes import list_alerts
from crashes.stats import Granularity, crash_stats
from ports.telemetry import instrumented

app = create_resolver()


@app.get("/v1/crashes")
def crashes(
    *, sku: Sku, from_: From = None, to: To = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT), DIGITS] = 100, cursor: Cursor = None,
    offset: Annotated[int | None, Query(ge=0, le=MAX_OFFSET, description="reports to skip; not with cursor"),
                      DIGITS] = None,
    order: Annotated[Order, Query(description="asc: oldest first, by reportId; desc: newest first")] = "asc",
    fields: Annotated[Fields, Query(description="summary, or full: with payload and attachments")] = "summary",
    crash_type: CrashType = None, error_code: ErrorCode = None, platform: Platform = None,
    build_version: BuildVersion = None, signature: Signature = None,
) -> Response[str]:
    a = current()
    query = ReportQuery(sku=sku, limit=limit, from_ms=from_, to_ms=to, cursor=cursor, offset=offset, order=order,
                        fields=fields, equals=narrowing(crash_type=crash_type, error_code=error_code,
                                                        platform=platform, build_version=build_version,
                                                        signature=signature))
    return json_response(200, list_reports(a.index, a.documents, query))


@app.get("/v1/crashes/<report_id>")
def crash(report_id: str) -> Response[str]:
    a = current()
    return json_response(200, get_report(a.index, a.documents, report_id))


# bytes: Powertools' response validation would encode them as text
@app.get("/v1/crashes/<report_id>/attachments/<name>", enable_validation=False)
def attachment(report_id: str, name: str) -> Response[bytes]:
    a = current()
    data, content_type = get_attachment(a.index, a.documents, report_id, name)
    return download_response(data, content_type, name)


@app.get("/v1/stats")
def stats(
    *, sku: Sku, from_: From = None, to: To = None,
    granularity: Annotated[Granularity, Query(description="one bucket a minute or an hour")] = "minute",
    crash_type: CrashType = None, error_code: ErrorCode = None, platform: Platform = None,
    build_version: BuildVersion = None,
) -> Response[str]:
    a = current()
    narrowed = narrowing(crash_type=crash_type, error_code=error_code, platform=platform, build_version=build_version)
    return json_response(200, crash_stats(a.index, a.counters, sku, from_ms=from_, to_ms=to, granularity=granularity,
                                          equals=narrowed))


@app.get("/v1/crash-groups")
def groups(
    *, sku: Sku, from_: From = None, to: To = None, limit: Annotated[int, Query(ge=1, le=MAX_GROUPS), DIGITS] = 20,
    crash_type: CrashType = None, error_code: ErrorCode = None, platform: Platform = None,
    build_version: BuildVersion = None,
) -> Response[str]:
    a = current()
    narrowed = narrowing(crash_type=crash_type, error_code=error_code, platform=platform, build_version=build_version)
    return json_response(200, crash_groups(a.index, a.documents, sku, from_ms=from_, to_ms=to, limit=limit,
                                           equals=narrowed))


@app.get("/v1/skus")
def skus(limit: Annotated[int, Query(ge=1, le=MAX_SKUS), DIGITS] = 100, cursor: Cursor = None) -> Response[str]:
    a = current()
    return json_response(200, list_skus(a.index, a.counters, limit=limit, cursor=cursor))


@app.get("/v1/alerts")
def alerts(sku: Sku, from_: From = None, to: To = None) -> Response[str]:
    a = current()
    return json_response(200, list_alerts(a.index, a.settings.spikes, sku, from_ms=from_, to_ms=to))


@app.get("/v1/health")
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
    body = {"status": "ok" if healthy else "unavailable", "components": components}
    return json_response(200 if healthy else 503, body)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
