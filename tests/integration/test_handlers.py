"""Every Lambda handler, run on its sample event from events/, against the embedded adapters."""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import sqlite3
import time
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.factory import Adapters, build, install
from adapters.settings import Settings
from api.requests import Posted
from crashes.signature import grouped
from crashes.spikes import SpikePolicy
from lambdas import (
    capture,
    crash_consumer,
    issues,
    key_source,
    leaderboards,
    minidump_processor,
    native,
    projects,
    purge,
    ranking_worker,
    reporter,
    session_counter,
    symbols,
)
from lambdas.functions import FUNCTIONS
from local_runtime.context import LocalContext
from pipeline.msk import from_msk_event, to_msk_event
from pipeline.topics import DEADLETTER, replay_spilled
from pipeline.topics import MINIDUMPS as WALKS
from ports import MAX_EPOCHS, BoardSettings
from ports.errors import StoreUnavailable
from ports.telemetry import CRASH_SPIKE
from ranking.model import Score
from ranking.seasons import REMEMBERED_MS
from tests.conftest import EVENTS, load_event

MINIDUMPS = EVENTS.parent / "tests" / "fixtures" / "minidumps"


def call(handler, name: str, **changes) -> dict:
    event = load_event(name) | changes
    return handler(event, LocalContext(function_name=name))


def as_sent(values: dict[str, str | list[str]], field: str = "headers") -> dict[str, dict]:
    """An event's headers (or query, `queryStringParameters`) as API Gateway gives both forms: a
    name's last value, and all of them."""
    every = {name: value if isinstance(value, list) else [value] for name, value in values.items()}
    multi = f"multiValue{field[0].upper()}{field[1:]}"
    return {field: {name: value[-1] for name, value in every.items()}, multi: every}


def body(response: dict) -> dict:
    return json.loads(response["body"])


def test_every_function_has_a_sample_event_named_after_it():
    samples = [path.name for path in EVENTS.glob("*.json")]
    assert all(any(s.startswith(function) for s in samples) for function in FUNCTIONS)
    assert all(any(s.startswith(function) for function in FUNCTIONS) for s in samples)


def test_capture_crash_sample_is_acknowledged_and_idempotent(adapters: Adapters):
    first = call(capture.handler, "capture-crash.json")
    again = call(capture.handler, "capture-crash.json")
    assert first["statusCode"] == 202
    assert body(first) == body(again)  # the sample carries an Idempotency-Key
    assert set(body(first)) == {"eventId", "reportKey"}


def test_capture_sessions_sample(adapters: Adapters):
    response = call(capture.handler, "capture-sessions.json")
    assert (response["statusCode"], body(response)) == (202, {"accepted": 2})


def test_consumer_samples_then_reporter_samples(adapters: Adapters):
    assert call(crash_consumer.handler, "crash-consumer.json") == {"persisted": 1}
    assert call(session_counter.handler, "session-counter.json") == {"counted": 2}
    assert call(session_counter.handler, "session-counter.json") == {"counted": 0}  # redelivered

    listing = call(reporter.handler, "reporter-list-crashes.json")
    assert listing["statusCode"] == 200
    [report] = body(listing)["reports"]
    assert report["reportId"] == 1 and report["crashType"] == "ACCESS_VIOLATION"

    detail = body(call(reporter.handler, "reporter-get-crash.json"))
    sent = json.loads(base64.b64decode(load_event("crash-consumer.json")["records"]["crashes-0"][0]["value"]))
    assert detail["payload"] == sent["payload"]

    attachment = call(reporter.handler, "reporter-get-attachment.json")
    assert attachment["isBase64Encoded"] is True
    assert base64.b64decode(attachment["body"]) == b"frame 18211: device lost\n"
    # a download, never a page (issue 15, finding 4)
    assert attachment["multiValueHeaders"]["Content-Type"] == ["application/octet-stream"]
    assert attachment["multiValueHeaders"]["Content-Disposition"][0].startswith("attachment")

    [group] = body(call(reporter.handler, "reporter-crash-groups.json"))["groups"]
    assert (group["count"], group["sampleReportId"], group["signature"]) == (1, 1, report["signature"])
    assert group["topFrames"][0] == "in Renderer::DrawMesh(Mesh const*) at renderer.cpp"

    stats = body(call(reporter.handler, "reporter-stats.json"))["series"]
    assert len(stats) == 60
    [busy] = [b for b in stats if b["crashes"]]
    assert busy == {"start": "2026-11-20T10:15:00.000Z", "sessions": 2, "crashes": 1, "crashRate": 0.5}


def test_health_sample(adapters: Adapters):
    response = call(reporter.handler, "reporter-health.json")
    assert response["statusCode"] == 200
    assert body(response)["components"] == {"log": "ok", "documents": "ok", "index": "ok"}


def test_health_reports_a_dead_component(adapters: Adapters):
    adapters.index.close()
    adapters.index.ping = lambda: (_ for _ in ()).throw(ConnectionError("gone"))  # type: ignore[method-assign]
    response = call(reporter.handler, "reporter-health.json")
    assert response["statusCode"] == 503
    assert body(response)["components"]["index"].startswith("unavailable")


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"body": "{not json"}, 400, "invalid_json"),
        ({"body": '{"crashType": "AV"}'}, 400, "missing_field"),
        ({"body": '{"sku": ["x"]}'}, 400, "invalid_field"),
        ({"body": json.dumps({"sku": "g", "pad": "x" * (1 << 20)})}, 413, "payload_too_large"),
        ({"headers": {"Content-Type": "text/plain"}}, 415, "unsupported_media_type"),
        # found from outside: a gzipped body was read as JSON, 400 invalid_json
        ({"headers": {"Content-Type": "application/json", "Content-Encoding": "gzip"}, "isBase64Encoded": True,
          "body": base64.b64encode(gzip.compress(b'{"sku": "g"}')).decode()}, 415, "unsupported_media_type"),
        ({"headers": {"Content-Type": "application/json", "Content-Encoding": "br"}}, 415, "unsupported_media_type"),
        ({"path": "/v1/nothing"}, 404, "not_found"),
        # found from outside: a body said to be base64 that is not was 500
        ({"isBase64Encoded": True, "body": "A"}, 400, "bad_request"),
        ({"isBase64Encoded": True, "body": "!!!" + base64.b64encode(b'{"sku": "g:pc"}').decode()}, 400, "bad_request"),
    ],
)
def test_capture_errors_have_the_contract_body(adapters: Adapters, changes, status, code):
    response = call(capture.handler, "capture-crash.json", **changes)
    assert response["statusCode"] == status
    assert body(response)["error"] == code and body(response)["message"]


def broken(*args, **kwargs):
    raise TimeoutError("unreachable")


def test_a_dead_log_spills_then_replay_publishes_and_the_report_arrives(adapters: Adapters, monkeypatch):
    publish = adapters.log.publish
    monkeypatch.setattr(adapters.log, "publish", broken)
    response = call(capture.handler, "capture-crash.json")
    assert response["statusCode"] == 202
    assert [s.topic for s in adapters.spill.list(10)] == ["crashes"]
    monkeypatch.setattr(adapters.log, "publish", publish)

    assert replay_spilled(adapters.log, adapters.spill) == 1
    assert adapters.spill.list(10) == []
    records = adapters.log.consumer("test", "crashes").poll(10, 1 << 30, 0.1)
    assert crash_consumer.handler(to_msk_event(records, "arn", "local"), LocalContext("crash-consumer")) == \
        {"persisted": 1}
    [report] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    assert report["eventId"] == body(response)["eventId"]


def test_a_spike_is_announced_once_though_its_batch_failed_after_the_index_write(adapters: Adapters, monkeypatch):
    """Found in review: the consumer announced the spikes of the reports persistence returned, and
    a batch delivered again after its index write (its walk requests not published) returns none."""
    monkeypatch.setattr(adapters.settings, "spikes", SpikePolicy(factor=1.5, baseline_minutes=30, min_crashes=2))
    told: list[str] = []
    monkeypatch.setattr(crash_consumer, "emit", lambda name, *args, **kwargs: told.append(name))
    dump = base64.b64encode((MINIDUMPS / "patch.dmp").read_bytes()).decode()
    for n in range(25):
        capture.crash(adapters.log, adapters.spill, Posted(json.dumps(
            {"sku": "g", "n": n, "attachments": {"crash.dmp": dump}}).encode()))
    event = to_msk_event(adapters.log.consumer("test", "crashes").poll(100, 1 << 30, 0.1), "arn", "local")
    publish = adapters.log.publish

    def walks_fail(topic: str, records: Any) -> None:
        if topic == WALKS:
            raise StoreUnavailable("log")
        publish(topic, records)

    monkeypatch.setattr(adapters.log, "publish", walks_fail)
    with pytest.raises(StoreUnavailable):
        crash_consumer.handler(event, LocalContext("crash-consumer"))
    announced = told.count(CRASH_SPIKE)
    assert announced >= 1  # the 25 may straddle a minute's end: a spike each side, or one
    monkeypatch.setattr(adapters.log, "publish", publish)
    assert crash_consumer.handler(event, LocalContext("crash-consumer")) == {"persisted": 0}
    assert told.count(CRASH_SPIKE) == announced


def test_a_spike_check_that_fails_once_the_rows_are_written_fails_no_batch(adapters: Adapters, monkeypatch, caplog):
    """Found in review: a failed read of the spikes, after the index write, failed the batch, and
    delivered again it had nothing new to tell: the failure went unseen."""
    def unread(*args: Any) -> None:
        raise StoreUnavailable("index")

    monkeypatch.setattr(crash_consumer, "announced", unread)
    assert call(crash_consumer.handler, "crash-consumer.json") == {"persisted": 1}
    assert any(r.getMessage() == "crash spikes not checked" and r.levelname == "ERROR" for r in caplog.records)


def test_a_dead_log_and_a_dead_spill_answer_503(adapters: Adapters, monkeypatch):
    monkeypatch.setattr(adapters.log, "publish", broken)
    monkeypatch.setattr(adapters.spill, "put", broken)
    response = call(capture.handler, "capture-crash.json")
    assert response["statusCode"] == 503 and body(response)["error"] == "unavailable"
    assert "unreachable" not in body(response)["message"]  # the stores' words are not the client's


def test_a_store_that_did_not_answer_is_503_and_its_words_stay_in_the_log(adapters: Adapters, monkeypatch, caplog):
    def away(*args, **kwargs):
        raise StoreUnavailable("index") from sqlite3.OperationalError("disk I/O error at /var/lib/secret")

    monkeypatch.setattr(adapters.index, "find", away)
    response = call(reporter.handler, "reporter-list-crashes.json")
    assert response["statusCode"] == 503
    assert body(response) == {"error": "unavailable", "message": "the index store did not answer; try again"}
    # the operator's log line has the engine's words, which the client does not get
    assert any("/var/lib/secret" in getattr(r, "error", "") for r in caplog.records)


def test_an_engine_error_no_adapter_put_in_the_ports_words_is_a_500(adapters: Adapters, monkeypatch):
    def unclassified(*args, **kwargs):
        raise sqlite3.OperationalError("no such table: reports")  # a bug, not an outage

    monkeypatch.setattr(adapters.index, "find", unclassified)
    response = call(reporter.handler, "reporter-list-crashes.json")
    assert response["statusCode"] == 500 and body(response)["error"] == "internal"


def test_a_bad_board_name_is_named_before_the_body_is_read(adapters: Adapters):
    response = call(leaderboards.handler, "leaderboards-put-board.json", path="/v1/leaderboards/b$d", body="{not json")
    assert response["statusCode"] == 400
    assert (body(response)["error"], body(response)["field"]) == ("invalid_field", "board")


def test_a_put_that_makes_a_board_answers_201_and_one_that_changes_it_200(adapters: Adapters):
    """As a PUT of a webhook or a project: a client can tell it made the board (HTTP's 201 Created)."""
    made, changed = (call(leaderboards.handler, "leaderboards-put-board.json") for _ in range(2))
    assert (made["statusCode"], changed["statusCode"]) == (201, 200)
    assert body(made) == body(changed)


def test_a_query_is_checked_before_its_board_is_looked_up(adapters: Adapters):
    response = call(leaderboards.handler, "leaderboards-top.json", path="/v1/leaderboards/nope/top",
                    queryStringParameters={"limit": "0"}, multiValueQueryStringParameters={"limit": ["0"]})
    assert (response["statusCode"], body(response)["field"]) == (400, "limit")
    assert call(leaderboards.handler, "leaderboards-top.json", path="/v1/leaderboards/nope/top")["statusCode"] == 404


def test_msk_event_shape_round_trips():
    event = load_event("crash-consumer.json")
    records = from_msk_event(event)
    assert to_msk_event(records, event["eventSourceArn"], event["bootstrapServers"]) == event
    assert records[0].headers[0][0] == "eventId"


def test_a_report_past_retention_is_listed_with_its_body_while_it_waits_for_the_purge(
        adapters: Adapters, monkeypatch: pytest.MonkeyPatch):
    """Found from outside: a report's body expired as its retention ended, and its index row waited
    for the purge (hourly under serve, daily in AWS): listed and counted meanwhile with no payload,
    its attachment 404, its group's topFrames empty."""
    crash = {"sku": "skyrift:pc", "stackTrace": "#0 0x1 in Texture::Load() at t.cpp:9"}
    assert call(capture.handler, "capture-crash.json", body=json.dumps(crash))["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 1}
    # past its retention by 47 hours: a daily purge that failed once may take that
    purged_by = time.time() * 1000 + adapters.settings.retention_days * 86_400_000 + 47 * 3_600_000
    monkeypatch.setattr("adapters.embedded.documents.now_ms", lambda: int(purged_by))
    [report] = body(call(reporter.handler, "reporter-list-crashes.json",
                         queryStringParameters={"sku": "skyrift:pc", "fields": "full"},
                         multiValueQueryStringParameters={"sku": ["skyrift:pc"], "fields": ["full"]}))["reports"]
    assert report["payload"]["stackTrace"] == crash["stackTrace"]


# what Lambda's runtime answers at most, the proxy answer as it writes it (JSON, the body a string in it)
LAMBDA_ANSWER_BYTES = 6 * 1024 * 1024


def test_a_page_of_full_reports_fits_the_answer_lambda_carries(adapters: Adapters):
    """Found from outside: a page stopped at 4 MB of its JSON, and Lambda writes that JSON again as a
    string, each `"` and `\\` escaped once more: 4 reports of a megabyte of backslashes (kept as
    sent) were an 8 MB answer, which Lambda refuses and API Gateway answers 502."""
    for n in range(4):
        crash = {"sku": "skyrift:pc", "crashType": f"AV{n}", "notes": "\\" * 520_000}
        assert call(capture.handler, "capture-crash.json", body=json.dumps(crash),
                    headers={"content-type": "application/json", "idempotency-key": f"big-{n}"})["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 4}
    answer = call(reporter.handler, "reporter-list-crashes.json",
                  queryStringParameters={"sku": "skyrift:pc", "fields": "full", "limit": "10"},
                  multiValueQueryStringParameters={"sku": ["skyrift:pc"], "fields": ["full"], "limit": ["10"]})
    page = body(answer)
    assert answer["statusCode"] == 200 and page["reports"] and page["nextCursor"]
    assert len(json.dumps(answer)) <= LAMBDA_ANSWER_BYTES


def test_a_top_page_of_the_largest_metadata_fits_the_answer_lambda_carries(adapters: Adapters):
    """Found from outside: metadata of `"`s within its bound, 1,000 entries of it, were a 6.4 MB answer
    as Lambda writes it, which API Gateway answers 502. A page stops short, and its cursor goes on."""
    metadata = next(m for n in range(128, 0, -1)
                    if _takes(m := {chr(ord("a") + k): '"' * n for k in range(16)}))
    board = "season-7:ranked"
    for start in range(0, 1000, 250):  # a megabyte a batch at most
        scores = [{"board": board, "playerId": f"p-{i:04}", "score": i, "metadata": metadata}
                  for i in range(start, start + 250)]
        assert call(capture.handler, "capture-scores.json", body=json.dumps(scores))["statusCode"] == 202
    assert _consume(adapters, "scores", ranking_worker.handler, "ranking-worker") == {"applied": 1000}

    def paged(onward: str, query: dict[str, str]) -> list[str]:
        """The players of the pages from `query` on, each page following the one before's `onward`
        cursor, in the board's order."""
        listed: list[str] = []
        while True:
            answer = call(leaderboards.handler, "leaderboards-top.json", queryStringParameters=query,
                          multiValueQueryStringParameters={name: [value] for name, value in query.items()})
            assert answer["statusCode"] == 200 and len(json.dumps(answer)) <= LAMBDA_ANSWER_BYTES
            page = body(answer)
            assert 0 < len(page["entries"]) < 1000  # a page stops short both ways
            players = [entry["playerId"] for entry in page["entries"]]
            listed = listed + players if onward == "nextCursor" else players + listed
            if page[onward] is None:
                return listed
            query = {"limit": "1000", "cursor": page[onward]}

    board_order = [f"p-{i:04}" for i in reversed(range(1000))]
    assert paged("nextCursor", {"limit": "1000"}) == board_order
    # and back up from the last entry: the pages above a cursor keep the entries nearest it
    assert paged("prevCursor", {"limit": "1", "offset": "999"}) == board_order


def _takes(metadata: dict[str, str]) -> bool:
    try:
        Score.model_validate({"board": "b", "playerId": "p", "score": 1, "metadata": metadata})
    except ValidationError:
        return False
    return True


def test_score_samples_through_capture_worker_and_leaderboards(adapters: Adapters):
    assert (call(capture.handler, "capture-scores.json")["statusCode"]) == 202
    assert body(call(leaderboards.handler, "leaderboards-put-board.json")) == \
        {"board": "season-7:ranked", "order": "desc", "operator": "best", "reset": "never", "ties": "shared",
         "keepSeasons": None, "startsAt": None, "endsAt": None, "maxAttempts": None, "maxPlayers": None}
    assert call(ranking_worker.handler, "ranking-worker.json") == {"applied": 3}
    assert call(ranking_worker.handler, "ranking-worker.json") == {"applied": 0}  # redelivered
    assert body(call(leaderboards.handler, "leaderboards-get-board.json"))["players"] == 3
    assert body(call(leaderboards.handler, "leaderboards-player.json")) == \
        {"playerId": "p-1029", "score": 4200, "rank": 2, "metadata": None}
    assert body(call(leaderboards.handler, "leaderboards-top.json"))["entries"] == [
        {"rank": 1, "playerId": "p-77", "score": 5100, "metadata": None},
        {"rank": 2, "playerId": "p-1029", "score": 4200, "metadata": None},
        {"rank": 2, "playerId": "p-5", "score": 4200, "metadata": None},
    ]
    assert [e["playerId"] for e in body(call(leaderboards.handler, "leaderboards-around.json"))["entries"]] == \
        ["p-77", "p-1029", "p-5"]
    assert body(call(leaderboards.handler, "leaderboards-rank.json")) == {"score": 5000, "rank": 2}


def test_a_retried_incr_score_counts_once(adapters: Adapters):
    event = load_event("capture-scores.json") | {
        "body": json.dumps([{"board": "xp", "playerId": "p", "score": 10}, {"board": "lvl", "playerId": "p",
                                                                                "score": 3}]),
        "headers": {"Content-Type": "application/json", "Idempotency-Key": "match-77"},
    }
    adapters.ranking.put_board(BoardSettings("xp", "desc", "incr"))
    for _ in range(2):
        assert capture.handler(event, LocalContext("capture"))["statusCode"] == 202
    records = adapters.log.consumer("test", "scores").poll(100, 1 << 20, 0.1)
    assert len(records) == 4  # two requests, one record per board each
    assert ranking_worker.handler(to_msk_event(records, "arn", "local"), LocalContext("ranking-worker")) == \
        {"applied": 2}
    assert adapters.ranking.scores("xp", ["p"]) == {"p": 10}


def test_a_crash_burst_is_announced_once_and_listed_under_alerts(adapters: Adapters, capfd, caplog):
    crash = load_event("capture-crash.json")
    for n in range(45):  # a quiet sku: 20 crashes in a minute is a spike (the default policy)
        event = crash | {"body": json.dumps({"sku": "burst", "n": n}), "headers": {"Content-Type": "application/json"}}
        assert capture.handler(event, LocalContext("capture"))["statusCode"] == 202
    records = adapters.log.consumer("test", "crashes").poll(100, 1 << 30, 0.1)
    capfd.readouterr()
    for batch in (records[:10], records[10:30], records[30:]):
        crash_consumer.handler(to_msk_event(batch, "arn", "local"), LocalContext("crash-consumer"))
    [announced] = [record for record in caplog.records if record.getMessage() == "crash spike"]
    assert announced.alert["sku"] == "burst" and announced.levelname == "WARNING"  # type: ignore[attr-defined]
    # the metric is an EMF line on stdout, which CloudWatch turns into a metric
    [metric] = [json.loads(line) for line in capfd.readouterr().out.splitlines() if "CrashSpike" in line]
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Blackbox" and metric["sku"] == "burst"

    query = {"sku": "burst"}
    alerts = call(reporter.handler, "reporter-list-crashes.json", path="/v1/alerts", queryStringParameters=query,
                  multiValueQueryStringParameters={k: [v] for k, v in query.items()})
    assert alerts["statusCode"] == 200
    assert sum(a["crashes"] for a in body(alerts)["alerts"]) >= 20  # 45 in at most two minutes


def test_in_aws_only_a_server_key_may_post_scores(adapters: Adapters, monkeypatch):
    monkeypatch.setattr(adapters.settings, "server_key_ids", ["srv-key-id"])
    event = load_event("capture-scores.json")

    def with_key(key_id: str | None) -> dict:
        context = event["requestContext"] | {"identity": event["requestContext"].get("identity", {}) | {
            "apiKeyId": key_id}}
        return capture.handler(event | {"requestContext": context}, LocalContext("capture"))

    assert with_key("srv-key-id")["statusCode"] == 202
    refused = with_key("ingest-key-id")
    assert (refused["statusCode"], body(refused)["error"]) == (403, "forbidden")
    assert with_key(None)["statusCode"] == 403


def test_purge_sample_runs_the_purge_and_leaves_the_log_to_its_retention(adapters: Adapters):
    assert call(capture.handler, "capture-crash.json")["statusCode"] == 202
    assert call(purge.handler, "purge-scheduled.json") == {
        "log_records": 0, "spilled": 0, "documents": 0, "reports": 0, "counter_rows": 0, "season_rows": 0,
        "alert_rows": 0,
    }
    assert len(adapters.log.consumer("check", "crashes").poll(10, 1 << 20, 0.1)) == 1


def cluster_named(event: dict, prefix: str) -> dict:
    """An MSK event as the event source mapping delivers it: the cluster's topic names, which
    carry the deployment's prefix."""
    return event | {"records": {prefix + key: [item | {"topic": prefix + item["topic"]} for item in items]
                                for key, items in event["records"].items()}}


def test_consumers_take_the_clusters_prefixed_topic_names(tmp_path):
    prefix = "blackbox-dev."
    built = build(Settings(data_dir=tmp_path / "data", kafka_topic_prefix=prefix))
    install(built)
    try:
        for n in range(12):
            sessions = {"sku": "skyrift:pc", "kind": "client", "playerId": f"p{n}"}
            assert call(capture.handler, "capture-sessions.json", body=json.dumps(sessions))["statusCode"] == 202
        records = built.log.consumer("test", "sessions").poll(100, 1 << 30, 0.1)
        first, second = next([a, b] for a, b in itertools.pairwise(records) if a.partition == b.partition)
        context = LocalContext("session-counter")
        assert session_counter.handler(cluster_named(to_msk_event([first, second], "arn", "b"), prefix), context) == \
            {"counted": 2}
        # a redelivery cut differently: the stored offset's record is read back from the log, by the
        # log's own name, to tell a redelivery from another log's offset
        assert session_counter.handler(cluster_named(to_msk_event([first], "arn", "b"), prefix), context) == \
            {"counted": 0}
        assert [r.topic for r in from_msk_event(cluster_named(to_msk_event([first], "arn", "b"), prefix), prefix)] \
            == ["sessions"]
    finally:
        install(None)
        built.close()


def test_the_native_samples_land_a_report_and_a_session_of_the_projects_sku_once(adapters: Adapters):
    assert call(projects.handler, "projects-put.json")["statusCode"] == 201
    assert call(projects.handler, "projects-put.json")["statusCode"] == 200  # the same sku again
    first, again = call(native.handler, "native-envelope.json"), call(native.handler, "native-envelope.json")
    assert first["statusCode"] == again["statusCode"] == 200
    assert body(first) == body(again) == {"id": "9f3c2a51d0e44b7fa1c2b3d4e5f60718"}
    crashes = adapters.log.consumer("test", "crashes").poll(10, 1 << 30, 0.1)
    assert crash_consumer.handler(to_msk_event(crashes, "arn", "local"), LocalContext("crash-consumer")) == \
        {"persisted": 1}  # the retry is the same event
    sessions = adapters.log.consumer("test", "sessions").poll(10, 1 << 30, 0.1)
    assert session_counter.handler(to_msk_event(sessions, "arn", "local"), LocalContext("session-counter")) == \
        {"counted": 1}
    [report] = body(call(reporter.handler, "reporter-list-crashes.json", queryStringParameters={
        "sku": "skyrift:pc", "fields": "full"}, multiValueQueryStringParameters={
        "sku": ["skyrift:pc"], "fields": ["full"]}))["reports"]
    assert (report["crashType"], report["errorCode"], report["platform"], report["buildVersion"]) == (
        "EXCEPTION_ACCESS_VIOLATION_READ", "SIGSEGV", "Windows", "skyrift@1.4.3")
    assert report["payload"]["stackTrace"].splitlines()[0].startswith("#0") and "Renderer::Draw" in \
        report["payload"]["stackTrace"].splitlines()[0]


def test_the_key_source_hands_api_gateway_a_sentry_sdks_key_wherever_the_sdk_put_it():
    allowed = call(key_source.handler, "key-source.json")
    assert allowed["usageIdentifierKey"] == "ingest-key"
    [statement] = allowed["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Resource"] == load_event("key-source.json")["methodArn"]
    in_query = call(key_source.handler, "key-source.json", **as_sent({}),
                    **as_sent({"sentry_key": "other-key", "sentry_version": "7"}, "queryStringParameters"))
    assert in_query["usageIdentifierKey"] == "other-key"
    auth = load_event("key-source.json")["headers"]["x-sentry-auth"]
    # found from outside: a key given twice was read as its last copy
    for headers in ({}, {"x-sentry-auth": "Sentry sentry_version=7"}, {"authorization": "Bearer x"},
                    {"x-sentry-auth": [auth, "Sentry sentry_key=other-key"]}):
        with pytest.raises(PermissionError, match=r"^Unauthorized$"):  # API Gateway's 401
            call(key_source.handler, "key-source.json", **as_sent(headers))


def _consume(adapters: Adapters, topic: str, handler, name: str) -> dict:
    consumer = adapters.log.consumer(f"test-{topic}", topic)
    records = consumer.poll(100, 1 << 30, 0.1)
    answer = handler(to_msk_event(records, "arn", "local"), LocalContext(name))
    consumer.commit(records)
    consumer.close()
    return answer


def test_a_reports_minidump_is_walked_and_walked_again_when_its_symbols_arrive(adapters: Adapters):
    """capture → crash consumer → processor → symbols → processor: the handlers as Lambda runs them."""
    dump = (MINIDUMPS / "level-magic.dmp").read_bytes()
    crash = {"sku": "skyrift:pc", "attachments": {"crash.dmp": base64.b64encode(dump).decode()}}
    assert call(capture.handler, "capture-crash.json", body=json.dumps(crash), headers={
        "Content-Type": "application/json", "Idempotency-Key": "walk-1"})["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 1}
    [pending] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    assert (pending["processing"], pending["crashType"]) == ("pending", None)

    assert _consume(adapters, "minidumps", minidump_processor.handler, "minidump-processor") == {"processed": 1}
    [report] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    assert (report["processing"], report["crashType"]) == ("processed", "SIGSEGV / SEGV_MAPERR")
    unnamed = report["signature"]

    sym = next(MINIDUMPS.glob("*/*/*.sym")).read_bytes()
    stored = call(symbols.handler, "symbols-post.json", body=base64.b64encode(sym).decode())
    assert stored["statusCode"] == 201, stored["body"]
    # the upload's request names the file; the processor asks for its reports, then walks them
    assert _consume(adapters, "minidumps", minidump_processor.handler, "minidump-processor") == {"processed": 0}
    assert _consume(adapters, "minidumps", minidump_processor.handler, "minidump-processor") == {"processed": 1}
    [named] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    assert named["processing"] == "processed" and named["signature"] not in (None, unnamed)
    # found from outside: a group of minidumps alone showed no top frames, the payload having no trace
    walked = body(call(reporter.handler, "reporter-get-crash.json"))["processed"]["frames"]
    [group] = body(call(reporter.handler, "reporter-crash-groups.json",  # the last day: the sample's is another
                        queryStringParameters={"sku": "skyrift:pc"},
                        multiValueQueryStringParameters={"sku": ["skyrift:pc"]}))["groups"]
    assert group["signature"] == named["signature"] and group["topFrames"] == grouped(
        [f["function"] or f"{f['module']}@{f['moduleOffset']}" for f in walked if f["trust"] != "scan"])
    assert any("@0x" not in frame for frame in group["topFrames"])  # named by the symbols


def test_a_regrouping_needs_no_stack_walker_where_no_minidump_is_walked(adapters: Adapters,
                                                                        monkeypatch: pytest.MonkeyPatch):
    """Found from outside: on a serve without the walker (no cargo), every batch of the processor
    failed looking for it, so a merge or reprocessing of reports without minidumps never moved them."""

    def missing() -> None:
        raise FileNotFoundError("blackbox-stackwalk")

    monkeypatch.setattr(minidump_processor, "_walker", missing)
    trace = "#0 0x1 in std::vector::push() at v.h:10\n#1 0x3 in Texture::Load() at t.cpp:9"
    crash = {"sku": "skyrift:pc", "stackTrace": trace}
    assert call(capture.handler, "capture-crash.json", body=json.dumps(crash))["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 1}
    [before] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    rules = call(issues.handler, "issues-reprocess.json", httpMethod="PUT", path="/v1/crash-groups:rules",
                 pathParameters={"proxy": "v1/crash-groups:rules"}, body=json.dumps({"skip": ["in std::*"]}),
                 headers={"content-type": "application/json"})
    assert rules["statusCode"] == 200, rules["body"]
    assert call(issues.handler, "issues-reprocess.json")["statusCode"] == 202
    assert _consume(adapters, "minidumps", minidump_processor.handler, "minidump-processor") == {"processed": 0}
    [after] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    assert after["signature"] not in (None, before["signature"])


def test_in_aws_a_groups_state_is_changed_by_the_iam_caller_who_signed(adapters: Adapters):
    """Found in a review of the stacks: AWS signs the reads and a group's changes with IAM (SigV4), no
    API key, so every change was recorded as by `server`. The signer's ARN is who changed it, its
    end kept where it is longer than the column."""
    crash = {"sku": "skyrift:pc", "stackTrace": "#0 0x1 in Texture::Load() at t.cpp:9"}
    assert call(capture.handler, "capture-crash.json", body=json.dumps(crash))["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 1}
    [report] = body(call(reporter.handler, "reporter-list-crashes.json"))["reports"]
    role = "arn:aws:sts::123456789012:assumed-role/"
    for signer, recorded in ((f"{role}triage/alice", f"{role}triage/alice"),
                             (f"{role}{'r' * 120}/bob", f"…{(role + 'r' * 120 + '/bob')[-127:]}")):
        event = load_event("issues-reprocess.json")
        event["requestContext"]["identity"]["userArn"] = signer
        path = f"/v1/crash-groups/{report['signature']}/state"
        changed = issues.handler(event | {
            "httpMethod": "PUT", "path": path, "pathParameters": {"proxy": path[1:]},
            "body": json.dumps({"state": "resolved"}), "headers": {"content-type": "application/json"}},
            LocalContext(function_name="issues"))
        assert changed["statusCode"] == 200, changed["body"]
        assert body(changed)["changedBy"] == recorded and len(recorded) <= 128


def test_a_groups_top_frames_are_those_its_skus_rules_make_its_signature_of(adapters: Adapters):
    """Found from outside: they were the default grouping's, so a studio tuning its globs saw frames
    its rules skip, and no join."""
    rules = call(issues.handler, "issues-reprocess.json", httpMethod="PUT", path="/v1/crash-groups:rules",
                 pathParameters={"proxy": "v1/crash-groups:rules"}, headers={"content-type": "application/json"},
                 body=json.dumps({"skip": ["in std::*"], "join": ["in *malloc*"]}))
    assert rules["statusCode"] == 200, rules["body"]
    trace = ("#0 0x1 in std::vector::push() at v.h:10\n#1 0x2 in my_malloc() at m.c:5\n"
             "#2 0x3 in Texture::Load() at t.cpp:9\n#3 0x4 in main")
    crash = {"sku": "skyrift:pc", "stackTrace": trace}
    assert call(capture.handler, "capture-crash.json", body=json.dumps(crash))["statusCode"] == 202
    assert _consume(adapters, "crashes", crash_consumer.handler, "crash-consumer") == {"persisted": 1}
    [group] = body(call(reporter.handler, "reporter-crash-groups.json", queryStringParameters={"sku": "skyrift:pc"},
                        multiValueQueryStringParameters={"sku": ["skyrift:pc"]}))["groups"]
    assert group["topFrames"] == ["in my_malloc() at m.c | in Texture::Load() at t.cpp", "in main"]


def test_the_symbols_sample_stores_a_file_and_a_bad_one_is_refused(adapters: Adapters):
    first, again = call(symbols.handler, "symbols-post.json"), call(symbols.handler, "symbols-post.json")
    assert (first["statusCode"], again["statusCode"]) == (201, 200)
    assert body(first)["path"] == "skyrift/2F966FB1AC189D7DF9DAA8B85E40D1B90/skyrift.sym"
    refused = call(symbols.handler, "symbols-post.json", body=base64.b64encode(b"MODULE nonsense\n").decode())
    assert (refused["statusCode"], body(refused)["error"]) == (400, "invalid_field")
    typed = call(symbols.handler, "symbols-post.json", headers={"content-type": "application/json"})
    assert typed["statusCode"] == 415


def test_the_processor_sample_passes_over_a_report_it_does_not_hold(adapters: Adapters):
    assert call(minidump_processor.handler, "minidump-processor.json") == {"processed": 0}


def test_a_symbol_upload_past_the_ones_a_process_decodes_at_once_is_told_to_retry(adapters: Adapters):
    """Found from outside: each upload inflates up to 64 MiB, and 32 at once on a serve's handler
    threads, 2 MB on the wire, took 3.7 GB and held its event loop for seconds."""
    sym = next(MINIDUMPS.glob("*/*/*.sym")).read_bytes()
    for _ in range(symbols.DECODED_AT_ONCE):  # as many uploads as a process decodes at once
        assert symbols.DECODING.acquire(blocking=False)
    try:
        shed = call(symbols.handler, "symbols-post.json", body=base64.b64encode(sym).decode())
        assert shed["statusCode"] == 503 and int(shed["multiValueHeaders"]["Retry-After"][0]) >= 1
        assert adapters.symbols.files("", 10) == []
    finally:
        for _ in range(symbols.DECODED_AT_ONCE):
            symbols.DECODING.release()
    assert call(symbols.handler, "symbols-post.json", body=base64.b64encode(sym).decode())["statusCode"] == 201



def _without_value(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "value"}


@pytest.mark.parametrize("odd", [lambda r: {**r, "value": None}, _without_value,
                                 lambda r: {**r, "headers": [{"correlationId": None}]}])
def test_a_tombstone_among_a_batchs_records_is_set_aside_alone(adapters: Adapters, odd) -> None:
    """Found from outside: a record with no value (a Kafka tombstone, which MSK delivers as a null
    or missing value) or a header of no value made the event's reading raise for the whole batch,
    which the event source mapping then retried whole, against rule 8 of docs/architecture.md."""
    event = load_event("session-counter.json")
    [(partition, [first])] = event["records"].items()
    later = {"eventId": "later", "receivedAt": first["timestamp"],
             "sessions": [{"sku": "skyrift:pc", "kind": "client"}]}
    event["records"][partition] = [
        first, odd({**first, "offset": first["offset"] + 1}),
        {**first, "offset": first["offset"] + 2, "value": base64.b64encode(json.dumps(later).encode()).decode()}]
    valued = odd(first).get("value") is not None
    # the first record's two sessions and the last's one; the odd one's too where it has a value
    assert session_counter.handler(event, LocalContext("session-counter")) == {"counted": 5 if valued else 3}
    dead = adapters.log.consumer("t", DEADLETTER).poll(10, 1 << 20, timeout_s=0.1)
    assert len(dead) == (0 if valued else 1)


@pytest.mark.parametrize("context", [{}, {"identity": None}, None])
def test_a_request_context_without_an_identity_is_a_caller_without_a_key(adapters: Adapters, context) -> None:
    """Found from outside: capture read the caller's key from requestContext.identity unguarded (500)."""
    event = load_event("capture-crash.json")
    if context is None:
        del event["requestContext"]
    else:
        event["requestContext"] = {**event["requestContext"], **context} if context else {
            k: v for k, v in event["requestContext"].items() if k != "identity"}
    assert capture.handler(event, LocalContext("capture"))["statusCode"] == 202


def test_a_path_parameter_api_gateway_sent_encoded_is_read_decoded(adapters: Adapters) -> None:
    """Found from outside: API Gateway (REST) gives a Lambda the path as the client encoded it, and
    the route's parameters were taken from it as they were: /players/p%201029 read the record of
    player "p%201029", and a DELETE there removed that player's, not "p 1029"'s."""
    players = [{"board": "season-7:ranked", "playerId": "p 1029", "score": 100},
               {"board": "season-7:ranked", "playerId": "p%201029", "score": 999}]
    assert call(capture.handler, "capture-scores.json", body=json.dumps(players))["statusCode"] == 202
    assert _consume(adapters, "scores", ranking_worker.handler, "ranking-worker")["applied"] == 2
    encoded = "/v1/leaderboards/season-7%3Aranked/players/p%201029"
    found = call(leaderboards.handler, "leaderboards-player.json", path=encoded)
    assert (found["statusCode"], body(found)["playerId"], body(found)["score"]) == (200, "p 1029", 100)
    literal = call(leaderboards.handler, "leaderboards-player.json", path=encoded.replace("%20", "%2520"))
    assert (literal["statusCode"], body(literal)["playerId"]) == (200, "p%201029")


def test_a_wipe_that_would_forget_a_season_still_needed_is_409_with_when_to_try_again(adapters: Adapters) -> None:
    """A board remembers its wipes (and changes of schedule) for REMEMBERED_MS, to place late scores
    and tell its seasons' ends: past MAX_EPOCHS in that time a wipe is refused, for a while."""
    path = "/v1/leaderboards/per-match"
    assert call(leaderboards.handler, "leaderboards-put-board.json", path=path,
                pathParameters={"proxy": path[1:]})["statusCode"] == 201
    for _ in range(2 * MAX_EPOCHS):
        refused = call(leaderboards.handler, "leaderboards-remove-player.json", path=path,
                       pathParameters={"proxy": path[1:]})
        if refused["statusCode"] != 200:
            break
        # two wipes in one millisecond are one: a fast machine made fewer than MAX_EPOCHS (CI, once)
        time.sleep(0.002)
    assert (refused["statusCode"], body(refused)["error"]) == (409, "too_many_seasons")
    board = adapters.ranking.get_board("per-match")
    assert board is not None and len(board.epochs) == MAX_EPOCHS and board.epochs[0][0] == 0
    assert 0 < int(refused["multiValueHeaders"]["Retry-After"][0]) <= REMEMBERED_MS // 1000


def test_a_sentry_protocol_past_what_is_spoken_is_400_in_aws_as_on_serve(adapters: Adapters):
    """Found from outside: serve answered `sentry_version=8` 400 `invalid_field`; in AWS the key
    source refused it as if the key were wrong (401), and no handler was asked."""
    headers = {**load_event("native-envelope.json")["headers"],
               "x-sentry-auth": "Sentry sentry_key=ingest-key, sentry_version=8"}
    allowed = call(key_source.handler, "key-source.json", **as_sent(headers))
    assert allowed["usageIdentifierKey"] == "ingest-key"
    refused = call(native.handler, "native-envelope.json", **as_sent(headers))
    assert (refused["statusCode"], body(refused)["error"]) == (400, "invalid_field")
    assert body(refused)["field"] == "X-Sentry-Auth"
