"""An unreachable broker delays data, never loses it: capture spills, replay delivers later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
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
