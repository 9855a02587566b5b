"""How a Kafka member fills a batch up to its byte limit on a real broker: a record taken that does
not fit is sought back to, and a seek throws away what the client had prefetched of the partition,
so the next poll waits for a fetch. A batch that is full stops before taking one more."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from ports import LogRecord, OutgoingRecord
from tests.contract.test_event_log import first_batch
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


class SeekCounting:
    """The member's client, counting its seeks."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self.seeks = 0

    def seek(self, partition: TopicPartition) -> None:
        self.seeks += 1
        self._consumer.seek(partition)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def test_a_full_batch_takes_no_record_it_would_hand_back() -> None:
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=f"{namespace()}.")
    try:
        log.publish("t", [OutgoingRecord(value=b"x" * 1000, key=b"k") for _ in range(10)])
        consumer = log.consumer("g", "t")
        client = SeekCounting(consumer._consumer)
        consumer._consumer = client  # type: ignore[assignment]
        batches: list[list[LogRecord]] = []
        while sum(len(b) for b in batches) < 10 and (batch := first_batch(consumer, max_records=100, max_bytes=2500)):
            batches.append(batch)
            consumer.commit(batch)
        consumer.close()
        assert [r.offset for b in batches for r in b] == list(range(10))
        assert [len(b) for b in batches] == [2] * 5  # what fits in 2500 bytes, every time
        assert client.seeks == 0
    finally:
        log.close()
