"""Failed batches replayed on a real Kafka broker, under a deployment's topic prefix as in MSK:
published back from the object's payload with their keys (so their partitions) and marked, or read
back from the broker by offset when an object comes without its payload."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.failed_batches import S3FailedBatches
from adapters.kafka import log as kafka_log
from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from pipeline.replay import replay_failed_batches
from pipeline.topics import READ_GROUP, REPLAYED, SCORES
from ports import OutgoingRecord
from tests.contract.test_event_log import drain
from tests.failed_batches import failed_batch, moto_bucket, put
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3FailedBatches]:
    with moto_bucket(monkeypatch) as store:
        yield store


@pytest.fixture
def log() -> Iterator[KafkaEventLog]:
    kafka = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=3, topic_prefix=f"{namespace()}.")
    yield kafka
    kafka.close()


def test_failed_batches_go_back_to_their_partitions_marked(log: KafkaEventLog, bucket: S3FailedBatches):
    prefix = log._prefix
    log.publish(SCORES, [OutgoingRecord(f"score {n}".encode(), f"board-{n % 2}".encode(), (("h", b"1"),))
                         for n in range(6)])
    given_up = drain(log.consumer("ranking-worker", SCORES), 6)
    first, rest = given_up[:2], given_up[2:]
    put(bucket, "with-payload", failed_batch(rest, prefix=prefix))
    put(bucket, "metadata-only", failed_batch(first, prefix=prefix, payload=False))

    assert replay_failed_batches(log, bucket, prefix) == (2, 6)
    assert bucket.keys() == []
    replayed = [r for r in drain(log.consumer("check", SCORES), 12) if REPLAYED in dict(r.headers)]
    assert sorted((r.value, r.key, r.partition) for r in replayed) == sorted(
        (r.value, r.key, r.partition) for r in given_up)
    assert all(dict(r.headers)["h"] == b"1" for r in replayed)
    assert {dict(r.headers)[REPLAYED] for r in replayed} == {
        f"failed-batch:{SCORES}-{r.partition}:{r.offset}".encode() for r in given_up}


def test_a_read_by_offset_names_the_deployments_read_group(log: KafkaEventLog, monkeypatch: pytest.MonkeyPatch):
    """The one group a role that reads by offset is granted on MSK (stacks/streaming.py)."""
    groups: list[str] = []

    class Recording(kafka_log.Consumer):
        def __init__(self, config: dict[str, object]) -> None:
            groups.append(str(config["group.id"]))
            super().__init__(config)

    monkeypatch.setattr(kafka_log, "Consumer", Recording)
    log.publish(SCORES, [OutgoingRecord(b"score", b"board")])
    [record] = drain(log.consumer("reader", SCORES), 1)
    assert log.read(SCORES, record.partition, record.offset) == record
    assert groups[-1] == f"{log._prefix}{READ_GROUP}"
