"""A log that only reads opens no producer: in AWS the reporter's role may read and not write, and
an idempotent producer asks the cluster for a producer id as it is made, which MSK refuses such a
role (ClusterAuthorizationFailed) on every health check and read. Found in a review of the stacks."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

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


class Unloaded:
    """A reader of a broker started again that has not loaded its topics yet: it answers that the
    partition is unknown, and its close waits for good, as librdkafka's can for a coordinator."""

    closing = threading.Event()

    def __init__(self, config: dict[str, Any]) -> None:
        pass

    def get_watermark_offsets(self, *_: Any, **__: Any) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

    def close(self) -> None:
        self.closing.wait()


def test_a_partition_the_cluster_has_is_never_read_as_missing_and_a_hung_reader_is_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: the ranking worker checks its stored offset's record with a read, and a read
    answered "unknown partition" while Kafka restarted came back None, which the worker takes for an
    offset of another log (an ERROR, an alarm in AWS); and a reader whose close hung held the worker."""
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=f"{namespace()}.")
    try:
        log.publish("crashes", [OutgoingRecord(key=b"k", value=b"v")])
        monkeypatch.setattr(kafka_log, "Consumer", Unloaded)
        monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 1.0)
        started = time.monotonic()
        with pytest.raises(KafkaException):
            log.read("crashes", 0, 0)
        assert log.read("crashes", 7, 0) is None  # a partition the cluster does not have
        assert log.read("elsewhere", 0, 0) is None  # nor a topic
        assert time.monotonic() - started < 3 * kafka_log.CLOSE_TIMEOUT_S + 10
    finally:
        Unloaded.closing.set()
        log.close()
