"""How a Kafka group member asks for its commits (adapters.kafka.log.KafkaLogConsumer): never waiting
for one, one at a time, so that an older one retried cannot land after a newer one and move the
group back; what is committed meanwhile goes merged once the one under way is answered, and at
close. The client here is a stand-in: a real broker's answers are the integration tests'."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from adapters.kafka import log as kafka_log
from adapters.kafka.log import KafkaLogConsumer
from ports import LogRecord


class Client:
    """Notes each commit asked for; answers none by itself."""

    def __init__(self) -> None:
        self.asked: list[dict[int, int]] = []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert asynchronous
        self.asked.append({tp.partition: tp.offset for tp in offsets})

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def assignment(self) -> list[TopicPartition]:
        return []

    def unsubscribe(self) -> None:
        pass

    def close(self) -> None:
        pass


def record(partition: int, offset: int) -> LogRecord:
    return LogRecord(topic="t", partition=partition, offset=offset, value=b"v", key=None, headers=(), timestamp_ms=0)


@pytest.fixture
def member() -> Any:
    made = KafkaLogConsumer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "g", "p.t", "t")  # no broker
    real, client = made._consumer, Client()
    made._consumer = client  # type: ignore[assignment]
    yield made, client
    real.close()


def test_one_commit_at_a_time_and_what_comes_meanwhile_goes_merged_once_answered(member: Any) -> None:
    consumer, client = member
    consumer.commit([record(0, 5), record(1, 2)])
    consumer.commit([record(0, 6)])
    consumer.commit([record(1, 3), record(2, 0)])
    assert client.asked == [{0: 6, 1: 3}]
    consumer.poll(10, 1 << 20, 0)
    assert len(client.asked) == 1  # not answered yet
    consumer._on_commit(None, [])
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 6, 1: 3}, {0: 7, 1: 4, 2: 1}]
    consumer.poll(10, 1 << 20, 0)
    assert len(client.asked) == 2  # nothing more waits


def test_a_commit_not_answered_in_time_is_taken_for_lost(member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, client = member
    consumer.commit([record(0, 1)])
    consumer.commit([record(0, 2)])
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.0)
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 2}, {0: 3}]


def test_close_sends_what_waits(member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, client = member
    consumer.commit([record(0, 1)])
    consumer.commit([record(3, 8)])
    real_consume = client.consume

    def answered(num_messages: int, timeout: float) -> list[Any]:  # as librdkafka serves answers in consume()
        consumer._on_commit(None, [])
        return real_consume(num_messages, timeout)

    client.consume = answered
    consumer.close()
    assert client.asked == [{0: 2}, {3: 9}]


def test_close_says_whether_every_commit_was_the_groups(member: Any) -> None:
    consumer, client = member
    consumer.commit([record(0, 1)])
    client.consume = lambda num_messages, timeout: consumer._on_commit(None, []) or []
    assert consumer.close() is True


@pytest.mark.parametrize("answer", ["refused", "none"])
def test_close_says_so_when_the_last_commit_was_refused_or_never_answered(
        member: Any, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    consumer, client = member
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.5)
    consumer.commit([record(0, 1)])
    if answer == "refused":
        refused = KafkaError(KafkaError.ILLEGAL_GENERATION)  # put out of the group meanwhile
        client.consume = lambda num_messages, timeout: consumer._on_commit(refused, []) or []
    assert consumer.close() is False


def test_a_member_whose_commits_were_answered_but_that_did_not_leave_in_time_says_they_are_the_groups(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in CI: after the fault suite's Kafka outage, a member's leave outlasted its bound while
    the group's coordinator loaded, and the stop said its offsets were not committed, where every
    commit it had asked for was answered; the group only drops it later, after its session timeout."""
    consumer, client = member
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.5)
    consumer.commit([record(0, 1)])
    client.consume = lambda num_messages, timeout: consumer._on_commit(None, []) or []
    left = threading.Event()
    client.close = lambda: left.wait(5)  # a leave the coordinator does not answer in time
    assert consumer.close() is True
    left.set()
