"""Reporter: the crash query API and health. Each route declares the query parameters it takes;
any other is refused (api.queryparams.Accepts)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.queryparams import NO_PARAMETERS, Accepts
from api.resolver import create_resolver, download_response, json_response
from crashes.groups import PARAMETERS as GROUP_PARAMETERS
from crashes.groups import crash_groups
from crashes.reporting import LIST_PARAMETERS, get_attachment, get_report, list_reports
from crashes.skus import PARAMETERS as SKU_PARAMETERS
from crashes.skus import list_skus
from crashes.spikes import list_alerts
from crashes.stats import PARAMETERS as STATS_PARAMETERS
from crashes.stats import crash_stats
from ports.telemetry import instrumented

SPAN = ("sku", "from", "to")

app = create_resolver()


@app.get("/v1/crashes", middlewares=[Accepts(*LIST_PARAMETERS)])
def crashes() -> Response[str]:
    a = current()
    return json_response(200, list_reports(a.index, a.documents, app.current_event.query_string_parameters))


@app.get("/v1/crashes/<report_id>", middlewares=[NO_PARAMETERS])
def crash(report_id: str) -> Response[str]:
    a = current()
    return json_response(200, get_report(a.index, a.documents, report_id))


@app.get("/v1/crashes/<report_id>/attachments/<name>", middlewares=[NO_PARAMETERS])
def attachment(report_id: str, name: str) -> Response[bytes]:
    a = current()
    data, content_type = get_attachment(a.index, a.documents, report_id, name)
    return download_response(data, content_type, name)


@app.get("/v1/stats", middlewares=[Accepts(*STATS_PARAMETERS)])
def stats() -> Response[str]:
    a = current()
    return json_response(200, crash_stats(a.index, a.counters, app.current_event.query_string_parameters))


@app.get("/v1/crash-groups", middlewares=[Accepts(*GROUP_PARAMETERS)])
def groups() -> Response[str]:
    a = current()
    return json_response(200, crash_groups(a.index, a.documents, app.current_event.query_string_parameters))


@app.get("/v1/skus", middlewares=[Accepts(*SKU_PARAMETERS)])
def skus() -> Response[str]:
    a = current()
    return json_response(200, list_skus(a.index, a.counters, app.current_event.query_string_parameters))


@app.get("/v1/alerts", middlewares=[Accepts(*SPAN)])
def alerts() -> Response[str]:
    a = current()
    return json_response(200, list_alerts(a.index, a.settings.spikes, app.current_event.query_string_parameters))


@app.get("/v1/health", middlewares=[NO_PARAMETERS])
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
