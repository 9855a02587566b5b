"""Crash groups: reports sharing a signature, largest first, from the index; each group's top
frames come from its sample report (one multi-get for all samples)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from crashes.model import ReportDocument
from crashes.processing import processed_key, read_processed, walked_frames
from crashes.signature import DEFAULT_RULES, grouped, top_frames
from ports import CrashIndex, DocumentStore
from ports.issues import GroupingRules
from ports.limits import cut
from ports.timeutil import HOUR_MS, Time, time_range, to_rfc3339

MAX_GROUPS = 100
# the most of a top frame a group answers, ending in "…": a report may hold one line of 1 MiB, and a
# listing of MAX_GROUPS groups stays within a few MB as Lambda carries it (ports.limits.carried_bytes)
MAX_FRAME_CHARS = 512
DEFAULT_SPAN_MS = 24 * HOUR_MS


@with_config(ConfigDict(extra="forbid"))
class Group(TypedDict):
    signature: str
    count: Annotated[int, Field(ge=1)]
    firstSeen: Time
    lastSeen: Time
    sampleReportId: int
    topFrames: Annotated[list[str], Field(description=(
        f"the sample report's signature frames, innermost first, each cut to {MAX_FRAME_CHARS} characters (ending "
        "in …)"))]


@with_config(ConfigDict(extra="forbid"))
class Groups(TypedDict):
    groups: list[Group]


def crash_groups(index: CrashIndex, documents: DocumentStore, sku: str, *, from_ms: int | None = None,
                 to_ms: int | None = None, limit: int = 20, equals: Mapping[str, str] | None = None,
                 rules: GroupingRules = DEFAULT_RULES) -> Groups:
    """`equals`: report filters by index field (crashes.reporting.narrowing); a signature filter
    would leave one group, so the route offers none. `rules`: the sku's, which make the frames
    shown of a sample's trace or walk, as they made its signature since they were set."""
    from_ms, to_ms = time_range(from_ms, to_ms, lambda to: to - DEFAULT_SPAN_MS)
    groups = index.crash_groups(sku, from_ms, to_ms, limit, equals)
    samples = {g.sample_report_id: r for g in groups if (r := index.get(g.sample_report_id)) is not None}
    # a sample's walk, when it has one, made its signature: its frames are the group's; else the
    # stack trace its client sent (the body read, up to 1 MiB, only then)
    walked = {r.entry.report_key for r in samples.values() if r.entry.processing == "processed"}
    found = documents.get_many([processed_key(r.entry.report_key) if r.entry.report_key in walked
                                else r.entry.report_key for r in samples.values()])
    frames: dict[int, list[str]] = {}
    for report_id, report in samples.items():
        key = report.entry.report_key
        if key in walked:
            walk = found.get(processed_key(key))
            tops = [] if walk is None else grouped(walked_frames(read_processed(walk)), rules)
        else:
            raw = found.get(key)
            trace = None if raw is None else ReportDocument.model_validate_json(raw).payload.get("stackTrace")
            tops = top_frames(trace, rules) if isinstance(trace, str) else []
        frames[report_id] = [cut(frame, MAX_FRAME_CHARS) for frame in tops]
    return {"groups": [
        {
            "signature": g.signature,
            "count": g.count,
            "firstSeen": to_rfc3339(g.first_seen),
            "lastSeen": to_rfc3339(g.last_seen),
            "sampleReportId": g.sample_report_id,
            "topFrames": frames.get(g.sample_report_id, []),
        }
        for g in groups
    ]}
