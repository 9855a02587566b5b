"""Crash groups: reports sharing a signature, largest first, from the index; each group's top
frames come from its sample report (one multi-get for all samples)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api import queryparams
from crashes.model import query_sku
from crashes.persistence import ReportDocument
from crashes.reporting import equals
from crashes.signature import top_frames
from ports import CrashIndex, DocumentStore
from ports.timeutil import HOUR_MS, to_rfc3339

MAX_GROUPS = 100
DEFAULT_SPAN_MS = 24 * HOUR_MS
# the report filters that narrow groups (a signature filter would leave one group)
FILTERS = ("crashType", "errorCode", "platform", "buildVersion")
# the query parameters of GET /v1/crash-groups
PARAMETERS = ("sku", "from", "to", "limit", *FILTERS)


def crash_groups(index: CrashIndex, documents: DocumentStore, params: Mapping[str, str]) -> dict[str, Any]:
    sku = query_sku(params)
    limit = queryparams.integer(params, "limit", 20, 1, MAX_GROUPS)
    from_ms, to_ms = queryparams.time_range(params, lambda to: to - DEFAULT_SPAN_MS)
    groups = index.crash_groups(sku, from_ms, to_ms, limit, equals(params, FILTERS))
    samples = {g.sample_report_id: index.get(g.sample_report_id) for g in groups}
    found = documents.get_many([r.entry.report_key for r in samples.values() if r is not None])
    frames: dict[int, list[str]] = {}
    for report_id, report in samples.items():
        raw = None if report is None else found.get(report.entry.report_key)
        trace = None if raw is None else ReportDocument.model_validate_json(raw).payload.get("stackTrace")
        frames[report_id] = top_frames(trace) if isinstance(trace, str) else []
    return {"groups": [
        {
            "signature": g.signature,
            "count": g.count,
            "firstSeen": to_rfc3339(g.first_seen),
            "lastSeen": to_rfc3339(g.last_seen),
            "sampleReportId": g.sample_report_id,
            "topFrames": frames[g.sample_report_id],
        }
        for g in groups
    ]}
