"""The scheduled replay of what was held back in AWS: the spill, and the batches an MSK event source
mapping gave up on (objects in its S3 on-failure destination, here in moto), published again on the
embedded log; and the metrics behind the alarms on both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.factory import Adapters, build, install
from adapters.failed_batches import S3FailedBatches
from adapters.settings import Settings
from api.requests import Posted
from lambdas import capture, replay
from local_runtime.context import LocalContext
from pipeline.replay import replay_held_back
from pipeline.topics import REPLAYED, SESSIONS
from ports import EventLog, LogRecord, OutgoingRecord
from ports.errors import ValueRefused
from ports.telemetry import FAILED_BATCHES, NAMESPACE, SPILLED_EVENTS, SPILLS_SET_ASIDE
from ports.timeutil import now_ms
from sessions.counting import count_sessions
from tests.conftest import load_event
from tests.failed_batches import BUCKET, PREFIX, REGION, failed_batch, moto_bucket, put
from tests.unit.test_replay_and_retention import sessions_counted


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3FailedBatches]:
    with moto_bucket(monkeypatch) as store:
        yield store


class Counter:
    """The session counter behind its event source mapping: a consumer group that commits what it
    was given, whether it counted it or gave it up."""

    def __init__(self, adapters: Adapters) -> None:
        self._adapters = adapters
        self._consumer = adapters.log.consumer("blackbox-dev-session-counter", SESSIONS)

    def give_up(self) -> list[LogRecord]:
        records = self._consumer.poll(1000, 1 << 30, timeout_s=0.1)
        self._consumer.commit(records)
        return records

    def count(self) -> int:
        records = self.give_up()
        return count_sessions(records, self._adapters.counters, self._adapters.log)


def sessions(adapters: Adapters, n: int) -> None:
    """One record holding n sessions."""
    body = json.dumps([{"sku": "g", "kind": "client"}] * n).encode()
    capture.sessions(adapters.log, adapters.spill, Posted(body))


def test_a_failed_batch_goes_back_to_its_topic_and_is_counted_once(adapters: Adapters, bucket: S3FailedBatches,
                                                                   monkeypatch: pytest.MonkeyPatch):
    for _ in range(3):
        sessions(adapters, 2)
    counter = Counter(adapters)
    given_up = counter.give_up()  # its retries spent, the mapping wrote the batch to S3 and went on
    put(bucket, "aws/lambda/esm/2026/11/14/batch-1", failed_batch(given_up))

    publish = adapters.log.publish
    monkeypatch.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
    with pytest.raises(TimeoutError):
        replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)
    assert len(bucket.keys()) == 1  # deleted only once published
    monkeypatch.setattr(adapters.log, "publish", publish)
    delete = bucket.delete
    monkeypatch.setattr(bucket, "delete", lambda _: (_ for _ in ()).throw(OSError("cut off")))
    with pytest.raises(OSError, match="cut off"):
        replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)  # published, not yet deleted
    monkeypatch.setattr(bucket, "delete", delete)
    result = replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)
    assert (result.failed_batches, result.failed_records) == (1, 3)
    assert bucket.keys() == []

    assert counter.count() == 6  # the batch came twice; its sessions count once
    assert sessions_counted(adapters) == 6
    everything = adapters.log.consumer("inspect", SESSIONS).poll(1000, 1 << 30, timeout_s=0.1)
    again = [r for r in everything if REPLAYED in dict(r.headers)]
    assert sorted((r.value, r.key) for r in again) == sorted((r.value, r.key) for r in given_up * 2)
    assert {dict(r.headers)[REPLAYED] for r in again} == {
        f"failed-batch:sessions-{r.partition}:{r.offset}".encode() for r in given_up}


def test_without_its_payload_a_batch_is_read_back_from_the_log_while_it_holds_it(
    adapters: Adapters, bucket: S3FailedBatches
):
    sessions(adapters, 1)
    counter = Counter(adapters)
    [record] = counter.give_up()
    put(bucket, "metadata-only", failed_batch([record], payload=False))
    assert replay_held_back(adapters.log, adapters.spill, bucket, PREFIX).failed_records == 1
    assert counter.count() == 1

    # once the log has dropped the records (retention) there is nothing to publish: it stays
    sessions(adapters, 1)
    [gone] = counter.give_up()
    put(bucket, "past-retention", failed_batch([gone], payload=False))
    adapters.log.publish(SESSIONS, [OutgoingRecord(b"{}", gone.key)])  # the purge keeps a partition's last record
    assert adapters.log.purge([SESSIONS], gone.timestamp_ms + 1) >= 1
    assert adapters.log.read(SESSIONS, gone.partition, gone.offset) is None
    assert replay_held_back(adapters.log, adapters.spill, bucket, PREFIX).failed_batches == 0
    assert bucket.keys() == ["past-retention"]


def test_a_batch_that_cannot_go_back_stays_without_holding_up_the_others(adapters: Adapters,
                                                                        bucket: S3FailedBatches):
    sessions(adapters, 1)
    [record] = Counter(adapters).give_up()
    put(bucket, "a-not-json", b"<html>")
    put(bucket, "b-another-deployment", failed_batch([replace(record, topic="other." + record.topic)]))
    put(bucket, "c-good", failed_batch([record]))
    result = replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)
    assert (result.failed_batches, result.failed_records) == (1, 1)
    assert bucket.keys() == ["a-not-json", "b-another-deployment"]


def test_the_spill_is_replayed_by_the_code_blackbox_replay_runs(adapters: Adapters):
    adapters.spill.put(SESSIONS, OutgoingRecord(b'{"eventId": "e", "receivedAt": 0, "sessions": []}'))
    assert replay_held_back(adapters.log, adapters.spill, None, PREFIX).spilled == 1
    assert adapters.spill.list(10) == []


def test_nothing_is_taken_out_while_the_log_is_away(adapters: Adapters, bucket: S3FailedBatches,
                                                    monkeypatch: pytest.MonkeyPatch):
    adapters.spill.put(SESSIONS, OutgoingRecord(b"{}"))
    put(bucket, "batch", b"{}")
    log: EventLog = adapters.log
    monkeypatch.setattr(log, "ping", lambda: (_ for _ in ()).throw(ConnectionError("log away")))
    with pytest.raises(ConnectionError):
        replay_held_back(log, adapters.spill, bucket, PREFIX)
    assert len(adapters.spill.list(10)) == 1 and bucket.keys() == ["batch"]


def emitted(out: str, name: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]
    return [m for m in lines if m["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == name]


@pytest.fixture
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in AWS: on, with the service name the dashboard's and alarms' dimension reads."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "blackbox")


def test_a_spill_and_the_failed_batches_found_are_counted(adapters: Adapters, bucket: S3FailedBatches,
                                                         metrics_on: None, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]):
    publish = adapters.log.publish
    monkeypatch.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
    sessions(adapters, 3)
    monkeypatch.setattr(adapters.log, "publish", publish)
    [spilled] = emitted(capsys.readouterr().out, SPILLED_EVENTS)
    assert (spilled[SPILLED_EVENTS], spilled["topic"], spilled["service"]) == ([1.0], SESSIONS, "blackbox")
    assert spilled["_aws"]["CloudWatchMetrics"][0]["Namespace"] == NAMESPACE
    assert spilled["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]  # what the alarms read

    put(bucket, "one", b"{}")
    put(bucket, "two", b"{}")
    replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)
    [found] = emitted(capsys.readouterr().out, FAILED_BATCHES)
    assert found[FAILED_BATCHES] == [2.0] and found["service"] == "blackbox"


def test_the_handler_replays_the_deployments_bucket(tmp_path: Path, bucket: S3FailedBatches):
    adapters = build(Settings(data_dir=tmp_path, failed_batches_bucket=BUCKET, aws_region=REGION,
                               kafka_topic_prefix=PREFIX))
    install(adapters)
    try:
        sessions(adapters, 1)
        put(bucket, "batch", failed_batch(Counter(adapters).give_up()))
        event = load_event("replay-scheduled.json")
        assert replay.handler(event, LocalContext("replay")) == {"spilled": 0, "failed_batches": 1,
                                                                 "failed_records": 1}
        assert bucket.keys() == []
    finally:
        install(None)
        adapters.close()


def test_a_spilled_record_the_log_refuses_is_set_aside_and_holds_back_nothing(
        adapters: Adapters, bucket: S3FailedBatches, metrics_on: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """Found from outside: a spilled record the log always refuses (past a topic's record size)
    stopped every replay, so the spills after it waited until retention purged them, unreplayed."""
    sessions(adapters, 1)
    counter = Counter(adapters)
    put(bucket, "aws/lambda/esm/2026/11/30/batch-1", failed_batch(counter.give_up()))
    with monkeypatch.context() as m:
        m.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
        sessions(adapters, 2)  # spilled, then refused
        sessions(adapters, 3)  # spilled after it
    [refused, _after] = adapters.spill.list(10)
    publish = adapters.log.publish

    def picky(topic: str, records: list[OutgoingRecord]) -> None:
        if any(dict(r.headers).get(REPLAYED) == f"spill:{refused.spill_id}".encode() for r in records):
            raise ValueRefused("Broker: Message size too large")
        publish(topic, records)

    monkeypatch.setattr(adapters.log, "publish", picky)
    capsys.readouterr()
    assert replay_held_back(adapters.log, adapters.spill, bucket, PREFIX).spilled == 1
    assert counter.count() == 1 + 3 and bucket.keys() == []
    assert adapters.spill.list(10) == []  # not tried again at every run
    [aside] = emitted(capsys.readouterr().out, SPILLS_SET_ASIDE)
    assert aside[SPILLS_SET_ASIDE] == [1.0] and aside["topic"] == SESSIONS
    assert adapters.spill.purge(now_ms() + 1) == 1  # kept as long as a spill is, then gone with it


def test_a_spill_replay_that_fails_holds_back_no_failed_batch(adapters: Adapters, bucket: S3FailedBatches,
                                                              monkeypatch: pytest.MonkeyPatch):
    """The spill stops at its first failure, to keep its order; the failed batches go back all the
    same while the log answers, and the run still fails, for its alarm."""
    sessions(adapters, 1)
    counter = Counter(adapters)
    put(bucket, "batch", failed_batch(counter.give_up()))
    with monkeypatch.context() as m:
        m.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
        sessions(adapters, 2)  # spilled
    monkeypatch.setattr(adapters.spill, "delete", lambda _: (_ for _ in ()).throw(OSError("spill store away")))
    with pytest.raises(OSError, match="spill store away"):
        replay_held_back(adapters.log, adapters.spill, bucket, PREFIX)
    assert bucket.keys() == [] and len(adapters.spill.list(10)) == 1
    assert counter.count() == 1 + 2  # the spill's event published (not deleted: a later replay's is counted once)


def test_a_spill_backlog_leaves_the_failed_batches_their_share_of_the_run(adapters: Adapters,
                                                                         bucket: S3FailedBatches):
    """Found in review: the replay emptied the spill before it looked at the failed batches, with no
    regard for its time: after a long outage each run was ended on the spill, at the function's
    timeout, and the failed batches waited for days. The spill takes half of what is left."""
    sessions(adapters, 1)
    counter = Counter(adapters)
    put(bucket, "aws/lambda/esm/2026/11/30/batch-1", failed_batch(counter.give_up()))
    for n in range(6):  # the spill of an outage
        adapters.spill.put(SESSIONS, OutgoingRecord(json.dumps([{"sku": "g", "kind": "client", "n": n}]).encode()))
    left = iter(range(100, -100, -10))  # seconds left, 10 fewer at each look

    result = replay_held_back(adapters.log, adapters.spill, bucket, PREFIX, remaining_s=lambda: next(left))
    assert (result.spilled, result.failed_batches) == (4, 1)  # looked at 100: the spill until 50
    assert len(adapters.spill.list(limit=10)) == 2  # for the next run
    assert replay_held_back(adapters.log, adapters.spill, bucket, PREFIX).spilled == 2
