"""The reporter: listing and reading crash reports. Summaries come from the index alone; bodies
and attachments are fetched from the document store only when asked for (rule 7 of docs/architecture.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, NotRequired

import pybase64
from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from crashes.model import ReportDocument, attachment_key
from crashes.processing import ProcessedReport, processed_key, read_processed
from ports import CrashIndex, DocumentStore, IndexedReport, ProcessingState, ReportFilter
from ports.cursors import Kind, decode_cursor, encode_cursor
from ports.errors import InvalidField, NotFound
from ports.limits import INT64_MAX, Sku, ascii_int, carried_bytes, within_bytes
from ports.timeutil import Time, check_order, to_rfc3339

MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000
# a page stops at ports.limits.PAGE_BYTES: one of 1,000 full reports of 100 KB would be 130 MB (of
# summaries, their fields outside ASCII, 100)

# a cursor says which way it pages, so one from an oldest-first listing never continues a newest-first one
_CURSOR_KIND = {"asc": Kind.REPORTS_ASC, "desc": Kind.REPORTS_DESC}
Order = Literal["asc", "desc"]
Fields = Literal["summary", "full"]


class ReportFilters(BaseModel):
    """The fields a listing narrows reports by, each matched exactly and all of them together;
    GET routes take them as query parameters of these names."""

    model_config = ConfigDict(extra="forbid")

    crashType: str | None = Field(None, description="only reports with this crashType")
    errorCode: str | None = Field(
        None, description="only reports with this errorCode; a number posted matches its decimal text (errorCode=7)")
    platform: str | None = Field(None, description="only reports from this platform")
    buildVersion: str | None = Field(None, description="only reports of this build")

    def equals(self) -> dict[str, str]:
        """The filters given, by index field (crashType → crash_type)."""
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(): value
                for name, value in self.model_dump(exclude_none=True).items()}


class ReportListFilters(ReportFilters):
    """And by signature, a crash group's reports (GET /v1/crashes)."""

    signature: str | None = Field(None, description="only reports with this signature")


@dataclass(frozen=True)
class ReportQuery:
    """A page of GET /v1/crashes: `equals` is by index field (ReportFilters.equals)."""

    sku: str
    limit: int = 100
    from_ms: int | None = None
    to_ms: int | None = None
    cursor: str | None = None
    offset: int | None = None
    order: Order = "asc"
    fields: Fields = "summary"
    equals: Mapping[str, str] = field(default_factory=dict)


@with_config(ConfigDict(extra="forbid"))
class Report(TypedDict):
    """A crash report as the index holds it; `payload` only in a full report."""

    reportId: Annotated[int, Field(ge=1)]
    reportKey: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    eventId: str
    sku: Sku
    submitTime: Time
    receivedAt: Time
    crashType: str | None
    errorCode: Annotated[str | None, Field(description=(
        'always a string here, as the index holds it: a number posted (7) is its decimal text ("7"); '
        "the payload keeps the number as posted"))]
    platform: str | None
    buildVersion: str | None
    signature: str | None
    sizeBytes: Annotated[int, Field(ge=0, description=(
        "the report's size as kept: a posted report's body; of a crash reporter's upload, the report it made "
        "(its JSON, the attachments in base64), whatever the upload's compression"))]
    attachments: list[str]
    processing: Annotated[ProcessingState | None, Field(description=(
        "of a report with a minidump: pending until the processor walked it, then processed or failed (the "
        "reason in `processed`); null without a minidump"))]
    processed: NotRequired[Annotated[ProcessedReport | None, Field(description=(
        "full reports only: the minidump's last walk (its crashing thread, modules and the symbol files it "
        "lacked); null until there is one"))]]
    # null when the document store no longer holds the body
    payload: NotRequired[Annotated[dict[str, Any] | None, Field(description=(
        "full reports only: the submitted object exactly as it came in, every value of the JSON type it "
        "was posted with (an errorCode or clientTime number stays a number)"))]]


@with_config(ConfigDict(extra="forbid"))
class ReportPage(TypedDict):
    reports: list[Report]
    nextCursor: str | None


def summary(report: IndexedReport) -> Report:
    e = report.entry
    return {
        "reportId": report.report_id,
        "reportKey": e.report_key,
        "eventId": e.event_id,
        "sku": e.sku,
        "submitTime": to_rfc3339(report.submit_time),
        "receivedAt": to_rfc3339(e.received_at),
        "crashType": e.crash_type,
        "errorCode": e.error_code,
        "platform": e.platform,
        "buildVersion": e.build_version,
        "signature": e.signature,
        "sizeBytes": e.size_bytes,
        "attachments": list(e.attachments),
        "processing": e.processing,
    }


def _after_id(cursor: str | None, order: Order) -> int | None:
    position = decode_cursor(cursor, _CURSOR_KIND[order])
    if position is None:
        return None
    report_id = ascii_int(position, 0, INT64_MAX)
    if report_id is None:
        raise InvalidField("cursor is not one this listing gave out", "cursor")
    return report_id


def _full(reports: Sequence[IndexedReport], documents: DocumentStore) -> list[Report]:
    """Summary plus the payload exactly as submitted: body and attachments in one multi-get."""
    keys = [r.entry.report_key for r in reports]
    keys += [attachment_key(r.entry.report_key, name) for r in reports for name in r.entry.attachments]
    keys += [processed_key(r.entry.report_key) for r in reports if r.entry.processing is not None]
    found = documents.get_many(keys)
    full = []
    for report in reports:
        item = summary(report)
        raw = found.get(report.entry.report_key)
        item["payload"] = None if raw is None else _payload(ReportDocument.model_validate_json(raw), found)
        if report.entry.processing is not None:
            walked = found.get(processed_key(report.entry.report_key))
            item["processed"] = None if walked is None else read_processed(walked)
        full.append(item)
    return full


def _payload(document: ReportDocument, found: Mapping[str, bytes]) -> dict[str, Any]:
    payload = dict(document.payload)
    if isinstance(payload.get("attachments"), dict):
        payload["attachments"] = {
            name: pybase64.b64encode(found.get(attachment_key(document.reportKey, name), b"")).decode()
            for name in payload["attachments"]
        }
    return payload


def list_reports(index: CrashIndex, documents: DocumentStore, q: ReportQuery) -> ReportPage:
    """Oldest first (`order=asc`, by reportId) or newest first (`order=desc`); the cursor pages on
    by reportId in that order, so a report indexed meanwhile is neither skipped nor repeated."""
    if q.cursor is not None and q.offset is not None:
        raise InvalidField("give cursor or offset, not both", "offset")
    if q.from_ms is not None and q.to_ms is not None:  # else open at that end
        check_order(q.from_ms, q.to_ms)
    query = ReportFilter(
        sku=q.sku,
        limit=q.limit + 1,  # one more tells whether there is a next page
        from_ms=q.from_ms,
        to_ms=q.to_ms,
        after_id=_after_id(q.cursor, q.order),
        offset=q.offset or 0,
        equals=dict(q.equals),
        newest_first=q.order == "desc",
    )
    found = index.find(query)
    page = found[:q.limit]
    if q.fields == "full":
        # the documents of those that fit as kept, then those that fit as carried: the answer
        # writes each non-ASCII character escaped (é, 2 bytes, as \u00e9: 3 times as many)
        page = page[:within_bytes(r.entry.size_bytes for r in page)]
        reports = _full(page, documents)
    else:
        reports = [summary(r) for r in page]
    reports = reports[:within_bytes(carried_bytes(json.dumps(r)) for r in reports)]
    page = page[:len(reports)]
    more = len(found) > len(page)
    next_cursor = encode_cursor(_CURSOR_KIND[q.order], str(page[-1].report_id)) if more else None
    return {"reports": reports, "nextCursor": next_cursor}


def _report(index: CrashIndex, report_id: str) -> IndexedReport:
    # within the index's BIGINT, or it names no report
    known = ascii_int(report_id, 0, INT64_MAX)
    report = None if known is None else index.get(known)
    if report is None:
        raise NotFound(f"no crash report {report_id}")
    return report


def get_report(index: CrashIndex, documents: DocumentStore, report_id: str) -> Report:
    return _full([_report(index, report_id)], documents)[0]


# raster images show as screenshots; anything else a client sent (HTML, SVG, XML, scripts) is bytes:
# a type from its name would let an attachment run as a page of the dashboard's origin
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
                ".webp": "image/webp"}


def get_attachment(
    index: CrashIndex, documents: DocumentStore, report_id: str, name: str
) -> tuple[bytes, str]:
    """The raw bytes and their content type: a raster image's by its name, else octet-stream."""
    report = _report(index, report_id)
    if name not in report.entry.attachments:
        raise NotFound(f"crash report {report_id} has no attachment {name!r}")
    key = attachment_key(report.entry.report_key, name)
    data = documents.get_many([key]).get(key)
    if data is None:
        raise NotFound(f"attachment {name!r} of crash report {report_id} has expired")
    return data, _IMAGE_TYPES.get(PurePosixPath(name).suffix.lower(), "application/octet-stream")
