"""An unreachable broker delays data, never loses it: capture spills, replay delivers later."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from adapters.kafka import log as kafka_log
from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog, KafkaLogConsumer
from adapters.spill.directory import DirectorySpillStore
from api.requests import Posted
from lambdas import capture
from ports import OutgoingRecord

CLOSED_PORT = "127.0.0.1:1"


def test_publish_to_an_unreachable_broker_raises_instead_of_hanging():
    log = KafkaEventLog(plaintext(CLOSED_PORT), publish_timeout_s=1.0)
    try:
        with pytest.raises((KafkaException, TimeoutError)):
            log.publish("crashes", [OutgoingRecord(value=b"x")])
    finally:
        log.close()


def test_capture_spills_when_the_broker_is_unreachable(tmp_path: Path):
    log = KafkaEventLog(plaintext(CLOSED_PORT), publish_timeout_s=1.0)
    spill = DirectorySpillStore(tmp_path / "spill")
    try:
        receipt = capture.crash(log, spill, Posted(json.dumps({"sku": "g"}).encode()))
    finally:
        log.close()
    [spilled] = spill.list(10)
    assert spilled.topic == "crashes"
    assert json.loads(spilled.record.value)["eventId"] == receipt.event_id


def test_a_member_with_no_coordinator_joins_again_with_a_new_client(monkeypatch: pytest.MonkeyPatch):
    """librdkafka's own statistics of a member with no broker to ask for its group's coordinator (as
    one was left after a broker restart) say so, and the member replaces its client; the old one
    closes."""
    monkeypatch.setattr(kafka_log, "STATS_INTERVAL_MS", 100)
    monkeypatch.setattr(kafka_log, "STALLED_S", 1.0)
    member = KafkaLogConsumer(plaintext(CLOSED_PORT), "g", "t", "t")
    try:
        first = member._consumer
        deadline = time.monotonic() + 20
        while member._consumer is first and time.monotonic() < deadline:
            assert member.poll(max_records=10, max_bytes=1 << 20, timeout_s=0.2) == []
        assert member._consumer is not first
        with pytest.raises(RuntimeError):  # closed
            first.assignment()
    finally:
        member.close()
