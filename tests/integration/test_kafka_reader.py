"""A log that only reads opens no producer: in AWS the reporter's role may read and not write, and
an idempotent producer asks the cluster for a producer id as it is made, which MSK refuses such a
role (ClusterAuthorizationFailed) on every health check and read. Found in a review of the stacks."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.kafka import log as kafka_log
from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from ports import OutgoingRecord
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


def test_reads_and_health_make_no_producer_and_the_first_publish_does(monkeypatch: pytest.MonkeyPatch):
    made: list[dict[str, Any]] = []
    real = kafka_log.Producer

    def counted(config: dict[str, Any]) -> kafka_log.Producer:
        made.append(config)
        return real(config)

    monkeypatch.setattr(kafka_log, "Producer", counted)
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=f"{namespace()}.")
    try:
        log.ping()
        assert log.end_offsets("crashes") == {}  # no topic made by a read
        assert log.read("crashes", 0, 0) is None
        assert made == []
        log.publish("crashes", [OutgoingRecord(key=b"k", value=b"v")])
        log.publish("crashes", [OutgoingRecord(key=b"k", value=b"w")])
        assert len(made) == 1 and made[0]["enable.idempotence"] is True
        assert log.end_offsets("crashes") == {0: 2}
    finally:
        log.close()


def test_a_log_that_never_published_closes():
    KafkaEventLog(plaintext(settings().kafka_bootstrap), topic_prefix=f"{namespace()}.").close()
