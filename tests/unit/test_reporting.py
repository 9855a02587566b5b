"""Listing, paging, filters, full payloads and stats, through the reporter's handler."""

from __future__ import annotations

import base64
import json

import pytest

from adapters.factory import Adapters
from api.requests import Posted
from crashes import groups as crash_groups
from crashes.persistence import persist_crashes
from crashes.reporting import get_attachment, get_report
from crashes.stats import MAX_BUCKETS
from lambdas import capture, reporter
from ports.errors import InvalidField, NotFound
from ports.limits import ascii_int
from ports.timeutil import now_ms, parse_time, to_rfc3339
from sessions.counting import count_sessions
from tests.conftest import get, ok


def ingest(adapters: Adapters, payloads: list[dict]) -> None:
    for payload in payloads:
        # as a client writes JSON, UTF-8 unescaped
        capture.crash(adapters.log, adapters.spill, Posted(json.dumps(payload, ensure_ascii=False).encode()))
    records = adapters.log.consumer("t", "crashes").poll(10_000, 1 << 30, timeout_s=0.1)
    persist_crashes(records, adapters.documents, adapters.index, adapters.log, adapters.documents_ttl_seconds)


def listing(adapters: Adapters, **params) -> dict:
    return ok(get(reporter.handler, "/v1/crashes", **params))


def test_cursor_pages_through_everything_once(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "n": i} for i in range(25)])
    seen, cursor = [], None
    while True:
        page = listing(adapters, sku="g", limit=10, **({"cursor": cursor} if cursor else {}))
        seen += [r["reportId"] for r in page["reports"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == 25 and seen == sorted(set(seen))
    assert [r["reportId"] for r in listing(adapters, sku="g", offset=20)["reports"]] == seen[20:]


def test_a_full_page_stops_short_of_the_response_limit_and_the_cursor_goes_on(adapters: Adapters):
    big = base64.b64encode(bytes(700 * 1024)).decode()
    ingest(adapters, [{"sku": "g", "n": i, "attachments": {"a.bin": big}} for i in range(9)])
    pages = [listing(adapters, sku="g", limit=100, fields="full")]
    while pages[-1]["nextCursor"]:
        pages.append(listing(adapters, sku="g", limit=100, fields="full", cursor=pages[-1]["nextCursor"]))
    assert [len(p["reports"]) for p in pages] == [4, 4, 1]  # 4 MiB a page, 0.93 MiB a report
    assert sorted(r["payload"]["n"] for p in pages for r in p["reports"]) == list(range(9))
    assert len(listing(adapters, sku="g", limit=100)["reports"]) == 9  # summaries carry no payload


def test_a_full_page_is_cut_by_the_answer_s_bytes_not_the_reports_as_sent(adapters: Adapters):
    """Found from outside: pages were cut by the reports' sizes as sent, where the answer writes
    each non-ASCII character escaped (é, 2 bytes, as \\u00e9): 4 reports of 1 MiB made one page of
    12.6 MB, past what API Gateway and Lambda answer."""
    ingest(adapters, [{"sku": "u", "n": i, "stackTrace": "é" * 500_000} for i in range(4)])
    pages = [listing(adapters, sku="u", limit=100, fields="full")]
    while pages[-1]["nextCursor"]:
        pages.append(listing(adapters, sku="u", limit=100, fields="full", cursor=pages[-1]["nextCursor"]))
    assert [len(p["reports"]) for p in pages] == [1, 1, 1, 1]  # 3 MB a report as answered
    assert all(len(json.dumps(page)) <= 4 * 1024 * 1024 for page in pages)
    assert sorted(r["payload"]["n"] for p in pages for r in p["reports"]) == list(range(4))


def test_a_summary_page_is_cut_by_the_answer_s_bytes_too(adapters: Adapters):
    """Found from outside: summaries had no bound but `limit`: fields of 256 characters and 64 attachment
    names of 128, outside ASCII, made a page of 1,000 summaries 107 MB."""
    wide = "\U0001d400"  # 12 bytes as answered
    ingest(adapters, [{"sku": "w", "n": i, "crashType": wide * 256, "platform": wide * 256,
                       "attachments": {f"{wide * 120}{k:02}": "aGk=" for k in range(64)}} for i in range(60)])
    pages = [listing(adapters, sku="w", limit=1000)]
    while pages[-1]["nextCursor"]:
        pages.append(listing(adapters, sku="w", limit=1000, cursor=pages[-1]["nextCursor"]))
    assert len(pages) > 1 and all(len(json.dumps(page)) <= 4 * 1024 * 1024 for page in pages)
    seen = [r["reportId"] for p in pages for r in p["reports"]]
    assert len(seen) == len(set(seen)) == 60


def test_summary_has_the_contract_fields_and_no_payload(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "crashType": "AV", "errorCode": 7, "platform": "ps5", "buildVersion": "1.0",
                       "stackTrace": "#0 0x1 in f()", "attachments": {"a.txt": "aGk="}}])
    [report] = listing(adapters, sku="g")["reports"]
    assert set(report) == {"reportId", "reportKey", "eventId", "sku", "submitTime", "receivedAt", "crashType",
                           "errorCode", "platform", "buildVersion", "signature", "sizeBytes", "attachments",
                           "processing"}
    assert report["errorCode"] == "7" and report["attachments"] == ["a.txt"]
    assert report["submitTime"].endswith("Z") and parse_time(report["submitTime"], "t") >= parse_time(
        report["receivedAt"], "t")


def test_full_payload_is_exactly_what_was_sent(adapters: Adapters):
    payloads = [
        {"sku": "g", "attachments": {"dump.bin": base64.b64encode(bytes(range(256))).decode()}, "x": [1, {"y": None}]},
        {"sku": "g", "attachments": {}},
        {"sku": "g", "unicode": "💥 ü", "float": 1.5},
    ]
    ingest(adapters, payloads)
    full = listing(adapters, sku="g", fields="full")["reports"]
    # reports from different log partitions are indexed in no promised order
    # exactly: the same JSON text, key order included
    assert sorted(json.dumps(r["payload"]) for r in full) == sorted(json.dumps(p) for p in payloads)
    [dump] = [r for r in full if r["attachments"] == ["dump.bin"]]
    assert get_report(adapters.index, adapters.documents, str(dump["reportId"]))["payload"] == payloads[0]
    data, content_type = get_attachment(adapters.index, adapters.documents, str(dump["reportId"]), "dump.bin")
    assert data == bytes(range(256)) and content_type == "application/octet-stream"


def test_filters(adapters: Adapters):
    ingest(adapters, [
        {"sku": "g", "platform": "ps5", "crashType": "AV", "errorCode": 1, "buildVersion": "1"},
        {"sku": "g", "platform": "pc", "crashType": "AV", "errorCode": "1", "buildVersion": "2"},
        {"sku": "g", "platform": "pc", "crashType": "OOM", "stackTrace": "#0 0x1 in boom()"},
    ])

    def found(**filters: str) -> list[tuple]:
        reports = listing(adapters, sku="g", **filters)["reports"]
        return sorted((r["platform"], r["crashType"], r["buildVersion"]) for r in reports)

    assert found(platform="pc") == [("pc", "AV", "2"), ("pc", "OOM", None)]
    assert found(crashType="AV", errorCode="1") == [("pc", "AV", "2"), ("ps5", "AV", "1")]
    assert found(buildVersion="2") == [("pc", "AV", "2")]
    [oom] = [r for r in listing(adapters, sku="g")["reports"] if r["crashType"] == "OOM"]
    assert found(signature=oom["signature"]) == [("pc", "OOM", None)]
    assert listing(adapters, sku="other")["reports"] == []


def test_time_range_is_on_submit_time(adapters: Adapters):
    ingest(adapters, [{"sku": "g"}])
    [report] = listing(adapters, sku="g")["reports"]
    submit = parse_time(report["submitTime"], "t")
    assert listing(adapters, sku="g", **{"from": to_rfc3339(submit)})["reports"] == [report]
    assert listing(adapters, sku="g", **{"from": submit + 1})["reports"] == []
    assert listing(adapters, sku="g", to=submit)["reports"] == []


@pytest.mark.parametrize(
    ("params", "error", "field"),
    [
        ({}, "missing_field", "sku"),
        ({"sku": ""}, "invalid_field", "sku"),  # given, and not a sku
        ({"sku": "g", "limit": "0"}, "invalid_field", "limit"),
        ({"sku": "g", "limit": "1001"}, "invalid_field", "limit"),
        ({"sku": "g", "limit": "ten"}, "invalid_field", "limit"),
        ({"sku": "g", "limit": " 5"}, "invalid_field", "limit"),
        ({"sku": "g", "limit": "1_0"}, "invalid_field", "limit"),
        ({"sku": "g b"}, "invalid_field", "sku"),
        ({"sku": "g", "cursor": "???"}, "invalid_field", "cursor"),
        ({"sku": "g", "cursor": "cjE", "offset": "1"}, "invalid_field", "offset"),
        ({"sku": "g", "cursor": "cjE", "offset": "0"}, "invalid_field", "offset"),
        ({"sku": "g", "fields": "all"}, "invalid_field", "fields"),
        ({"sku": "g", "from": "yesterday"}, "invalid_field", "from"),
        ({"sku": "g", "from": "2026-01-01T00:00:00"}, "invalid_field", "from"),
    ],
)
def test_bad_query_parameters(adapters: Adapters, params, error, field):
    status, body = get(reporter.handler, "/v1/crashes", **params)
    assert (status, body["error"], body["field"]) == (400, error, field)
    assert field in body["message"]


def test_missing_reports_and_attachments_are_not_found(adapters: Adapters):
    ingest(adapters, [{"sku": "g", "attachments": {"a": "AA=="}}])
    for report_id in ("999", "abc", "-1"):
        with pytest.raises(NotFound):
            get_report(adapters.index, adapters.documents, report_id)
    with pytest.raises(NotFound):
        get_attachment(adapters.index, adapters.documents, "1", "b")


def test_stats_count_crashes_and_sessions_per_bucket(adapters: Adapters):
    ingest(adapters, [{"sku": "g"}, {"sku": "g"}, {"sku": "h"}])
    capture.sessions(adapters.log, adapters.spill, Posted(json.dumps([{"sku": "g", "kind": "client"}] * 4).encode()))
    count_sessions(adapters.log.consumer("t", "sessions").poll(100, 1 << 30, 0.1), adapters.counters, adapters.log)
    now = now_ms()
    series = ok(get(reporter.handler, "/v1/stats", sku="g", **{"from": now - 120_000}, to=now + 60_000))["series"]
    assert len(series) in (3, 4)
    assert sum(b["crashes"] for b in series) == 2 and sum(b["sessions"] for b in series) == 4
    busy = [b for b in series if b["sessions"]]
    assert busy[0]["crashRate"] == busy[0]["crashes"] / busy[0]["sessions"]
    assert all(b["crashRate"] is None for b in series if not b["sessions"])
    hourly = ok(get(reporter.handler, "/v1/stats", sku="g", granularity="hour"))["series"]
    assert len(hourly) == 24 and sum(b["crashes"] for b in hourly) == 2


def test_stats_count_a_last_minute_s_crashes_as_far_as_its_sessions(adapters: Adapters):
    """Found from outside: a `to` within a minute counted that minute's sessions whole (they are
    counted by the minute) and its crashes only up to `to`: a minute of crashes read a rate of 0."""
    for attempt in range(3):  # until the writes fall within the minute they began in
        sku, before = f"m{attempt}", now_ms()
        ingest(adapters, [{"sku": sku, "buildVersion": "1.0"}] * 2)
        capture.sessions(adapters.log, adapters.spill, Posted(json.dumps(
            [{"sku": sku, "kind": "client", "buildVersion": "1.0"}] * 4).encode()))
        count_sessions(adapters.log.consumer(f"m{attempt}", "sessions").poll(100, 1 << 30, 0.1), adapters.counters,
                       adapters.log)
        if now_ms() // 60_000 == before // 60_000:
            break
    minute = before - before % 60_000
    for path, key in (("/v1/stats", "series"), ("/v1/releases/1.0", "series")):
        answer = ok(get(reporter.handler, path, sku=sku, **{"from": minute}, to=before))
        assert [(b["sessions"], b["crashes"]) for b in answer[key]] == [(4, 2)], path


@pytest.mark.parametrize(("granularity", "step", "buckets"), [("minute", 60_000, 60), ("hour", 3_600_000, 24)])
@pytest.mark.parametrize("offset", [0, 1, -1])
def test_stats_by_default_answer_the_last_hour_or_day_whole(adapters: Adapters, granularity, step, buckets, offset):
    """Found from outside: a `to` on a bucket's start answered a bucket fewer (59 minutes, 23 hours)."""
    to = 1_764_000_000_000 - 1_764_000_000_000 % 3_600_000 + offset
    series = ok(get(reporter.handler, "/v1/stats", sku="g", granularity=granularity, to=str(to)))["series"]
    assert len(series) == buckets
    assert series[-1]["start"] == to_rfc3339(-(-to // step) * step - step)


@pytest.mark.parametrize(("params", "field"), [
    ({"from": "1000", "to": "1000"}, "to"),
    ({"from": "0"}, "from"),  # more buckets than a week of minutes
    ({"granularity": "day"}, "granularity"),
])
def test_stats_bad_ranges(adapters: Adapters, params, field):
    status, body = get(reporter.handler, "/v1/stats", sku="g", **params)
    assert (status, body["error"], body["field"]) == (400, "invalid_field", field)


def test_stats_answer_at_most_their_bucket_limit(adapters: Adapters):
    """Found by probing from outside: a range a minute short of a bucket more than the limit
    answered 10,081 buckets (the check floored what the series counts up)."""
    start = 1_764_000_000_000 - 1_764_000_000_000 % 60_000
    week = start + MAX_BUCKETS * 60_000
    series = ok(get(reporter.handler, "/v1/stats", sku="g", **{"from": str(start), "to": str(week)}))["series"]
    assert len(series) == MAX_BUCKETS
    status, body = get(reporter.handler, "/v1/stats", sku="g", **{"from": str(start), "to": str(week + 59_999)})
    assert (status, body["field"]) == (400, "from")


@pytest.mark.parametrize("to", ["1000", "999"])
def test_a_crash_listing_to_before_or_at_its_from_is_refused(adapters: Adapters, to: str):
    """Found by probing from outside: GET /v1/crashes answered 200 and no reports to a range that
    ends before it begins (the contract: `to` after `from`), where every other route refuses it."""
    status, body = get(reporter.handler, "/v1/crashes", sku="g", **{"from": "1000", "to": to})
    assert (status, body["error"], body["field"]) == (400, "invalid_field", "to")


def test_crash_groups_with_top_frames_from_the_sample(adapters: Adapters):
    trace = "#0 0x1 in CrashHandler::OnSignal()\n#1 0x2 in Render::Draw() at r.cpp:{line}\n#2 0x3 in main"
    ingest(adapters, [{"sku": "g", "stackTrace": trace.format(line=n)} for n in range(3)]
           + [{"sku": "g", "stackTrace": "#0 0x9 in Audio::Mix()"}, {"sku": "g"}])
    groups = ok(get(reporter.handler, "/v1/crash-groups", sku="g"))["groups"]
    assert [(g["count"], g["topFrames"]) for g in groups] == [
        (3, ["in Render::Draw() at r.cpp", "in main"]), (1, ["in Audio::Mix"])]
    first = groups[0]
    ids = [r["reportId"] for r in listing(adapters, sku="g", signature=first["signature"])["reports"]]
    assert first["sampleReportId"] == min(ids) and len(ids) == 3
    assert first["firstSeen"] <= first["lastSeen"]
    assert get(reporter.handler, "/v1/crash-groups", sku="g", limit=101)[0] == 400


def test_a_groups_top_frames_are_cut_to_a_line_s_length(adapters: Adapters):
    """Found from outside: a sample's frame was answered whole, however long: a report of one frame of
    250,000 characters outside ASCII made its group 3 MB as answered, and 100 groups 300 MB."""
    wide = "\U0001d400"  # 12 bytes as answered
    ingest(adapters, [{"sku": "t", "stackTrace": f"#0 0x1 in {wide * 60_000}{n}\n#1 0x2 in main"} for n in range(3)])
    groups = ok(get(reporter.handler, "/v1/crash-groups", sku="t"))["groups"]
    assert len(groups) == 3 and len(json.dumps(groups)) < 3 * 10 * crash_groups.MAX_FRAME_CHARS * 12
    first = [g["topFrames"][0] for g in groups]
    assert all(len(frame) == crash_groups.MAX_FRAME_CHARS and frame.endswith("\u2026") for frame in first)
    assert all(g["topFrames"][1:] == ["in main"] for g in groups)


@pytest.mark.parametrize("text", ["\u00b9", "-\u00b2", "1_000", "99999999999999999999", "-99999999999999999999",
                                  "9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+01:00",
                                  # found from outside: ISO 8601 but not RFC 3339, each read as a date
                                  "2026-W01-1T00:00Z", "20260101T000000Z", "2026-01-01T00Z", "2026-01-01T00:00Z",
                                  "2026-001T00:00:00Z", "2026-01-01T00:00:00+0100", "2026-01-01T00:00:00,5Z"])
def test_times_are_ascii_epoch_milliseconds_within_rfc3339s_years(text: str):
    with pytest.raises(InvalidField):
        parse_time(text, "from")


def test_epoch_milliseconds_and_rfc3339_name_the_same_instant():
    assert parse_time(" -5 ", "t") == -5
    assert parse_time("253402300799999", "t") == parse_time("9999-12-31T23:59:59.999Z", "t")


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("-5", -5), ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", None), ("\u00b2", None), ("\u0661\u0662", None), ("1_000", None), (" 1", None),
    ("+1", None), ("", None),
])
def test_ascii_int_takes_ascii_digits_within_range_only(text: str, expected: int | None):
    assert ascii_int(text, -(2**63), 2**63 - 1) == expected
