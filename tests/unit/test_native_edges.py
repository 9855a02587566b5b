"""Native uploads at their edges, each found by a review from outside: sessions an upload may claim,
aggregates alike to the byte from two servers, the body's limit as sent, project ids and cursors
that are not ASCII digits, a title key checked before the body is read."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from adapters.factory import Adapters
from crashes.persistence import persist_crashes
from lambdas import native, projects, reporter
from local_runtime.context import LocalContext
from ports.errors import InvalidField
from ports.limits import MAX_BODY_BYTES, PAGE_BYTES
from reporters import projects as project_listing
from reporters.capture import capture_envelope
from reporters.encoding import MAX_GZIP_MEMBERS, decode_body
from reporters.errors import ReporterError
from reporters.sentry import parse_envelope
from sessions.counting import count_sessions
from tests.conftest import get, load_event, ok

SKU = "skyrift:pc"


def aggregates(*counts: int) -> bytes:
    buckets = [{"started": f"2026-11-24T05:{n:02d}:00Z", "exited": count} for n, count in enumerate(counts)]
    item = json.dumps({"attrs": {"release": "skyrift@1.0"}, "aggregates": buckets}).encode()
    return b'{}\n{"type":"sessions"}\n' + item + b"\n"


def counted(adapters: Adapters) -> int:
    records = adapters.log.consumer("test", "sessions").poll(100, 1 << 30, 0.1)
    count_sessions(records, adapters.counters, adapters.log)
    return sum(adapters.counters.session_counts(SKU, 0, 2**62, 2**61).values())


def test_an_upload_claims_at_most_the_sessions_of_one_sessions_post(adapters: Adapters) -> None:
    with pytest.raises(InvalidField, match="at most 500"):
        capture_envelope(adapters.log, adapters.spill, parse_envelope(aggregates(2**32 - 1, 2**32 - 1), SKU), SKU)
    capture_envelope(adapters.log, adapters.spill, parse_envelope(aggregates(300, 200), SKU), SKU)
    assert counted(adapters) == 500


def test_two_servers_alike_aggregates_count_twice_and_a_sessions_retry_once(adapters: Adapters) -> None:
    for _ in range(2):  # two servers, the same minute and release, one exited session each
        capture_envelope(adapters.log, adapters.spill, parse_envelope(aggregates(1), SKU), SKU)
    ended = (b'{}\n{"type":"session"}\n{"sid":"5e1c5cbf-3c5b-4f0a-9d7c-0c1c2d3e4f50",'
             b'"started":"2026-11-24T05:00:00Z","status":"exited"}\n')
    for _ in range(2):  # one session's end, sent again
        capture_envelope(adapters.log, adapters.spill, parse_envelope(ended, SKU), SKU)
    assert counted(adapters) == 3


def upload(path: str, body: bytes, **headers: str) -> dict[str, Any]:
    event = load_event("native-envelope.json") | {
        "path": path, "body": base64.b64encode(body).decode(), "isBase64Encoded": True,
        "headers": {"content-type": "application/x-sentry-envelope", **headers}}
    response: dict[str, Any] = native.handler(event, LocalContext("native"))
    return response


def test_a_body_over_the_limit_as_sent_is_413_whatever_it_decodes_to(adapters: Adapters) -> None:
    projects.handler(load_event("projects-put.json"), LocalContext("projects"))
    padded = gzip.compress(b"{}\n") + b"\0" * MAX_BODY_BYTES  # gzip's trailing zeros: small once decoded
    assert upload("/api/42/envelope/", padded, **{"content-encoding": "gzip"})["statusCode"] == 413
    members = gzip.compress(b"") * (MAX_GZIP_MEMBERS + 1)
    with pytest.raises(ReporterError, match="members"):
        decode_body(members, "gzip", MAX_BODY_BYTES)


@pytest.mark.parametrize("project", ["%C2%B2", "²", "١٢", "0", "12345678901234567"])
def test_a_project_id_that_is_not_ascii_digits_is_404_not_a_crash(adapters: Adapters, project: str) -> None:
    projects.handler(load_event("projects-put.json"), LocalContext("projects"))
    answer = upload(f"/api/{project}/envelope/", b"{}\n")
    assert answer["statusCode"] == 404, answer


# 5,000 digits, found from outside: past what int() converts, a ValueError and a 500
@pytest.mark.parametrize("position", ["²", "9" * 30, "9" * 5000, "", "-1"])
def test_a_forged_project_cursor_is_refused(adapters: Adapters, position: str) -> None:
    cursor = base64.urlsafe_b64encode(f"p{position}".encode()).decode().rstrip("=")
    with pytest.raises(InvalidField):
        project_listing.listing(adapters.projects, cursor=cursor)


def test_a_title_key_cannot_tell_another_titles_project_from_none(adapters: Adapters,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A title key ships in a game: were another title's project 403 and a free id 404, it could walk
    the project ids (and a 403 named the sku behind each)."""
    projects.handler(load_event("projects-put.json"), LocalContext("projects"))
    monkeypatch.setattr(type(adapters), "key_skus", {"title-ember": ["ember:pc"]})

    def answer(project: int) -> tuple[int, Any]:
        event = load_event("native-envelope.json") | {"path": f"/api/{project}/envelope/",
                                                       "body": "not an envelope at all"}
        event["requestContext"]["identity"]["apiKeyId"] = "title-ember"
        response = native.handler(event, LocalContext("native"))
        body = json.loads(response["body"])
        return response["statusCode"], {**body, "message": body["message"].replace(str(project), "N")}

    assert answer(42) == answer(43)  # 42 is skyrift:pc's, 43 nobody's; the body is not read
    assert answer(42)[0] == 404


def test_an_upload_refused_for_its_sessions_keeps_nothing_of_its_crash(adapters: Adapters) -> None:
    event = json.dumps({"exception": {"values": [{"type": "ShaderError"}]}}).encode()
    crash_and_too_many = aggregates(400, 200).replace(b"{}\n", b'{}\n{"type":"event"}\n' + event + b"\n", 1)
    with pytest.raises(InvalidField, match="at most 500"):
        capture_envelope(adapters.log, adapters.spill, parse_envelope(crash_and_too_many, SKU), SKU)
    assert adapters.log.consumer("test", "crashes").poll(10, 1 << 30, 0.1) == []


@pytest.mark.parametrize("project", ["9007199254740992", "0"])
def test_a_project_id_out_of_bounds_is_refused_under_the_contracts_name(adapters: Adapters, project: str) -> None:
    event = load_event("projects-put.json") | {"path": f"/v1/projects/{project}"}
    answer = projects.handler(event, LocalContext("projects"))
    assert (answer["statusCode"], json.loads(answer["body"])["field"]) == (400, "projectId")


def test_a_full_page_of_compressed_uploads_fetches_about_a_page_not_every_report(
        adapters: Adapters, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: a report's size in the index was its upload's as sent, compressed, and a full
    page's documents are fetched by that size: a thousand gzipped uploads of 1 KB, each a report of
    about 1 MB, were all fetched (a GB) to answer a page of four."""
    projects.handler(load_event("projects-put.json"), LocalContext("projects"))
    event = json.dumps({"exception": {"values": [{"type": "ShaderError"}]}}).encode()
    attachment = bytes(700_000)  # 933 KB in base64 in the report; 1 KB gzipped
    envelope = (b'{}\n{"type":"event","length":%d}\n%s\n{"type":"attachment","length":%d,"filename":"save.dat"}\n'
                % (len(event), event, len(attachment)) + attachment + b"\n")
    for _ in range(12):
        assert upload("/api/42/envelope/", gzip.compress(envelope), **{"content-encoding": "gzip"})["statusCode"] == 200
    persist_crashes(adapters.log.consumer("t", "crashes").poll(100, 1 << 30, 0.1), adapters.documents, adapters.index,
                    adapters.log, adapters.documents_ttl_seconds)
    fetched: list[int] = []
    get_many = adapters.documents.get_many

    def counting(keys: Any) -> dict[str, bytes]:
        found = get_many(keys)
        fetched.append(sum(map(len, found.values())))
        return found

    monkeypatch.setattr(adapters.documents, "get_many", counting)
    page = ok(get(reporter.handler, "/v1/crashes", sku=SKU, fields="full", limit=1000))
    assert len(page["reports"]) == 4 and page["nextCursor"]  # 933 KB each as answered
    assert sum(fetched) <= PAGE_BYTES + MAX_BODY_BYTES
    assert page["reports"][0]["sizeBytes"] >= len(attachment)  # the report as kept, not the upload as sent
