"""Members of one consumer group on a real Kafka broker while the group rebalances: a member that
loses its partitions while it fills a batch hands back what it took instead of handing it to its
handler and committing offsets of partitions another member now reads. Without failures every
record then reaches exactly one member once, in order within a batch (the offsets kept in SQL skip
a batch delivered again, not a record repeated inside one: rule 4 of docs/architecture.md), and all is committed."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, TopicPartition

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from ports import OutgoingRecord
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services

PARTITIONS = 4
RECORDS = 1_500_000
# batches far larger than serve's: a member spends most of its time filling one, so a rebalance
# reaches it mid-batch
VALUE = b"v" * 100
BATCH = 20_000
# the handler's time: the partitions' new owners read the committed offsets meanwhile
HANDLER_S = 0.02


class Member(threading.Thread):
    def __init__(self, log: KafkaEventLog) -> None:
        super().__init__(daemon=True)
        self._consumer = log.consumer("g", "t")
        self._leave = threading.Event()
        # (partition, first offset, offsets) of each partition's run in each batch
        self.runs: list[tuple[int, int, list[int]]] = []

    def run(self) -> None:
        while not self._leave.is_set():
            if batch := self._consumer.poll(BATCH, 64 << 20, timeout_s=0.2):
                by_partition: dict[int, list[int]] = defaultdict(list)
                for record in batch:
                    by_partition[record.partition].append(record.offset)
                self.runs += [(p, offsets[0], offsets) for p, offsets in by_partition.items()]
                time.sleep(HANDLER_S)
                self._consumer.commit(batch)
        self._consumer.close()

    def started(self) -> Member:
        """Once it has a batch: the group has rebalanced to take it in."""
        self.start()
        deadline = time.monotonic() + 30
        while not self.runs:
            assert time.monotonic() < deadline, "no partition came, or the backlog ran out"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._leave.set()
        self.join()


def delivered(member: Member) -> int:
    return sum(len(offsets) for _, _, offsets in member.runs)


def test_a_member_that_loses_partitions_mid_batch_hands_them_over_whole():
    prefix = f"{namespace()}."
    config = plaintext(settings().kafka_bootstrap)
    log = KafkaEventLog(config, partitions=PARTITIONS, topic_prefix=prefix)
    try:
        for start in range(0, RECORDS, 20_000):
            log.publish("t", [OutgoingRecord(VALUE, key=b"%d" % n) for n in range(start, start + 20_000)])
        ends = log.end_offsets("t")
        first = Member(log).started()
        while delivered(first) < RECORDS // 5:  # until its client fetches ahead of it
            time.sleep(0.01)
        second = Member(log).started()  # joins: the group rebalances
        second.stop()  # leaves: again
        members = [first, second]
        deadline = time.monotonic() + 120
        while sum(map(delivered, members)) < RECORDS and time.monotonic() < deadline:
            time.sleep(0.5)
        first.stop()

        runs = sorted(run for m in members for run in m.runs)
        for partition, end in ends.items():
            offsets = [o for p, _, run in runs if p == partition for o in run]
            assert offsets == list(range(end)), f"partition {partition}: records repeated, skipped or out of order"
        group = Consumer({**config, "group.id": f"{prefix}g"})
        committed = group.committed([TopicPartition(f"{prefix}t", p) for p in ends], timeout=10)
        group.close()
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        log.close()
