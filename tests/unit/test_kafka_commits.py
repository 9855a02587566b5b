"""How a Kafka group member asks for its commits (adapters.kafka.log.KafkaLogConsumer): never waiting
for one, one at a time, so that an older one retried cannot land after a newer one and move the
group back; what is committed meanwhile goes merged once the one under way is answered, and at
close. The client here is a stand-in: a real broker's answers are the integration tests'."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from adapters.kafka import log as kafka_log
from adapters.kafka.log import KafkaLogConsumer
from ports import LogRecord


class Client:
    """Notes each commit asked for; answers none by itself. Its callbacks, as the library would call
    them, are `config`'s and `on_assign`/`on_revoke`/`on_lost`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.asked: list[dict[int, int]] = []

    def subscribe(self, topics: list[str], *, on_assign: Any, on_revoke: Any, on_lost: Any) -> None:
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost

    def assigned(self, *partitions: int) -> None:
        self.on_assign(self, [TopicPartition("p.t", p) for p in partitions])

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
def member(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(kafka_log, "Consumer", Client)
    made = KafkaLogConsumer({"bootstrap.servers": "127.0.0.1:1"}, "g", "p.t", "t")
    made._consumer.assigned(*range(8))
    return made, made._consumer


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


def test_a_commit_taken_for_lost_is_asked_again_when_nothing_came_after_it(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in CI: a member whose last commit went unanswered (the fault suite's Kafka outage) never
    asked for those offsets again, and its stop said they were not committed."""
    consumer, client = member
    consumer.commit([record(0, 1), record(1, 4)])
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.0)
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 2, 1: 5}, {0: 2, 1: 5}]
    consumer._on_commit(None, [])
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 60.0)
    assert consumer.close() is True
    assert len(client.asked) == 2


def test_a_commit_refused_for_a_passing_cause_is_asked_again_after_a_pause(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in the fault suite's serve log: after Kafka's restart a coordinator still loading refused
    a commit, and those offsets stayed behind on a partition that took no more records."""
    consumer, client = member
    consumer.commit([record(0, 1), record(1, 4)])
    consumer.commit([record(1, 5)])
    consumer._on_commit(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), [])
    consumer.poll(10, 1 << 20, 0)
    assert len(client.asked) == 1  # not at once: a refusal for good would be asked for every poll
    monkeypatch.setattr(kafka_log, "ASK_AGAIN_S", 0.0)
    consumer._again_at = 0.0
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 2, 1: 5}, {0: 2, 1: 6}]
    consumer._on_commit(None, [])
    assert consumer.close() is True


def test_only_the_partitions_refused_are_asked_again(member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer, client = member
    monkeypatch.setattr(kafka_log, "ASK_AGAIN_S", 0.0)
    consumer.commit([record(0, 1), record(1, 4)])
    # as the library's TopicPartition, which takes no error when made here
    consumer._on_commit(None, [SimpleNamespace(partition=0, offset=2, error=None),
                               SimpleNamespace(partition=1, offset=5, error=KafkaError(KafkaError.REQUEST_TIMED_OUT))])
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 2, 1: 5}, {1: 5}]


def test_a_commit_refused_because_the_group_put_the_member_out_is_not_asked_again(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The member joins again and starts its partitions over at their committed offsets, whose
    records the stored offsets skip and commit again."""
    consumer, client = member
    monkeypatch.setattr(kafka_log, "ASK_AGAIN_S", 0.0)
    consumer.commit([record(0, 1)])
    consumer._on_commit(KafkaError(KafkaError.UNKNOWN_MEMBER_ID), [])
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 2}]


def report(consumer: Any, at_s: float, state: str, for_s: float = 0) -> None:
    """librdkafka's statistics made at `at_s` on its clock, the group `state` for `for_s`."""
    consumer._on_stats(json.dumps({"ts": int(at_s * 1e6), "cgrp": {"state": state, "stateage": int(for_s * 1000)}}))


def stalled(consumer: Any) -> None:
    report(consumer, 100, "query-coord", 5)
    report(consumer, 100 + kafka_log.STALLED_S, "wait-coord", 1)


def test_a_member_whose_group_has_had_no_coordinator_for_long_joins_again_with_a_new_client(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in the fault suite's serve log: after Kafka's restart one member of a serve kept asking
    for its group's coordinator with no broker to ask, for minutes, while the others went on."""
    consumer, client = member
    closed = threading.Event()
    client.close = closed.set
    consumer.commit([record(0, 1), record(1, 4)])  # not answered: the client stalled
    consumer.commit([record(1, 5)])
    stalled(consumer)
    assert consumer.poll(10, 1 << 20, 0) == []
    new = consumer._consumer
    assert new is not client and closed.wait(5)
    # the group took the partitions from the stalled client: whoever has them starts at their
    # committed offsets, so the new client asks for nothing of the old one's
    new.assigned(1)
    consumer.commit([record(1, 5)])
    assert new.asked == [{1: 6}]
    # and the old one, closing, is not heard
    client.config["stats_cb"](json.dumps({"ts": 10**12, "cgrp": {"state": "query-coord", "stateage": 10**7}}))
    client.config["on_commit"](KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS), [])
    consumer.poll(10, 1 << 20, 0)
    assert consumer._consumer is new and consumer._asking == {1: 6}
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.5)
    assert consumer.close() is False  # the new one's commit is not answered


def test_a_group_up_again_keeps_the_client(member: Any) -> None:
    consumer, client = member
    stalled(consumer)
    report(consumer, 100 + kafka_log.STALLED_S + 5, "up")
    consumer.poll(10, 1 << 20, 0)
    assert consumer._consumer is client


def test_a_member_whose_batch_took_long_keeps_its_client(member: Any) -> None:
    """The statistics come within consume(), so none while the caller handles a batch (the minidump
    processor's may take 900 s): those served after it are timed by when they were made."""
    consumer, client = member
    report(consumer, 100, "up")
    report(consumer, 100 + 5 * kafka_log.STALLED_S, "wait-coord", 2)  # a coordinator moving meanwhile
    consumer.poll(10, 1 << 20, 0)
    assert consumer._consumer is client


def test_the_partitions_the_group_took_for_lost_are_their_next_owners_to_commit(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in the fault suite: a member the group had dropped while Kafka was away (its partitions
    taken, then committed by the other member) kept asking for its own refused commit, and the stop
    said its offsets were not committed."""
    consumer, client = member
    monkeypatch.setattr(kafka_log, "ASK_AGAIN_S", 0.0)
    consumer.commit([record(0, 1), record(1, 4)])
    consumer.commit([record(3, 2)])
    client.on_lost(client, [TopicPartition("p.t", p) for p in range(4)])
    consumer._on_commit(KafkaError(KafkaError._WAIT_COORD), [])
    consumer.commit([record(5, 7)])
    assert client.asked == [{0: 2, 1: 5}, {5: 8}]
    consumer._on_commit(None, [])
    assert consumer.close() is True


def test_a_partition_revoked_with_a_commit_under_way_still_has_its_offsets_asked_for(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: serve stops the members of a group together, and one's leave hands the
    other's partitions over while that one's commit is under way."""
    consumer, client = member
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.5)
    consumer.commit([record(0, 4)])
    consumer.commit([record(0, 9)])
    client.on_revoke(client, [TopicPartition("p.t", 0)])
    consumer._on_commit(None, [TopicPartition("p.t", 0, 5)])
    consumer.poll(10, 1 << 20, 0)
    assert client.asked == [{0: 5}, {0: 10}]
    assert consumer.close() is False  # not answered


def test_a_partition_refused_when_the_member_was_put_out_and_given_back_is_not_held_against_it(
        member: Any) -> None:
    """Found in review: the partition's next owner committed it, and gave it back."""
    consumer, client = member
    consumer.commit([record(1, 3)])
    consumer._on_commit(KafkaError(KafkaError.UNKNOWN_MEMBER_ID), [])
    client.on_lost(client, [TopicPartition("p.t", 1)])
    client.assigned(1)
    assert consumer.close() is True


def test_offsets_left_with_a_stalled_client_are_said_not_committed(
        member: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Found in review: a revoke (not taken for lost) keeps a partition's waiting offsets; if the
    client then stalls, its replacement starts over at the committed offsets, and the stop says so."""
    consumer, client = member
    monkeypatch.setattr(kafka_log, "ASK_AGAIN_S", 60.0)
    consumer.commit([record(2, 6)])
    consumer._on_commit(KafkaError(KafkaError._WAIT_COORD), [])
    client.on_revoke(client, [TopicPartition("p.t", 2)])
    stalled(consumer)
    consumer.poll(10, 1 << 20, 0)
    assert consumer._consumer is not client
    assert "offsets not committed of partitions [2]" in caplog.text
    assert consumer.close() is False


def test_a_stalled_member_that_holds_partitions_keeps_its_client(member: Any) -> None:
    """Statistics of an outage left unserved behind a batch may come after the group gave the
    client partitions again: closing it then would make a rebalance (librdkafka#4884)."""
    consumer, client = member
    stalled(consumer)
    client.assignment = lambda: [TopicPartition("p.t", 0)]
    consumer.poll(10, 1 << 20, 0)
    assert consumer._consumer is client


def test_a_late_answer_to_a_commit_taken_for_lost_is_not_the_answer_to_the_one_asked_since(
        member: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: a sent commit may be answered after 15 s (socket.timeout.ms, retries)."""
    consumer, client = member
    consumer.commit([record(0, 9)])
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 0.0)
    consumer.commit([record(1, 6)])
    monkeypatch.setattr(kafka_log, "CLOSE_TIMEOUT_S", 60.0)
    assert client.asked == [{0: 10}, {0: 10, 1: 7}]
    consumer._on_commit(None, [TopicPartition("p.t", 0, 10)])  # the first's, late
    assert consumer._asking == {0: 10, 1: 7}
    consumer._on_commit(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
                        [TopicPartition("p.t", 0, 10), TopicPartition("p.t", 1, 7)])
    assert consumer._waiting == {0: 10, 1: 7}


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
