"""Topic provisioning on the real local Kafka: the deploy's custom resource and ensure_topic give
every topic the record size limit the producer uses, so the largest report capture accepts goes
onto the log (MSK Serverless's default would refuse it), and provisioning waits out a cluster
that does not answer yet instead of failing the deploy on its first admin request."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from adapters.kafka import log as kafka_log
from adapters.kafka.auth import plaintext
from adapters.kafka.log import ADMIN_TIMEOUT_S, MAX_MESSAGE_BYTES, KafkaEventLog, producer_config, provision_topics
from adapters.spill.directory import DirectorySpillStore
from api.requests import Posted
from lambdas import capture
from lambdas.provisioning import create_topics
from loadgen.payloads import crash
from local_runtime.context import LocalContext
from pipeline.topics import ALL_TOPICS, CRASHES, DEADLETTER, SESSIONS, publish, replay_spilled, retention_days
from ports import LogRecord, OutgoingRecord
from ports.errors import ValueRefused
from ports.limits import MAX_BODY_BYTES
from ports.timeutil import now_ms
from tests.services import namespace, settings

# MSK Serverless's max.message.bytes for a topic created without one
MSK_DEFAULT_MAX_MESSAGE_BYTES = 1048588
RETENTION_MS = str(7 * 86_400_000)


def admin() -> AdminClient:
    return AdminClient({"bootstrap.servers": settings().kafka_bootstrap})


def topic_settings(name: str) -> dict[str, str]:
    client = admin()  # kept until the answer is in: a client collected earlier cancels its requests
    deadline = time.monotonic() + 15
    while True:
        [future] = client.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=10).values()
        try:
            return {key: entry.value for key, entry in future.result(timeout=15).items()}
        except KafkaException as error:
            # a topic just made may not be known yet to the broker that answers (CI, once)
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.services
def test_the_custom_resource_gives_every_topic_the_producers_limit(monkeypatch: pytest.MonkeyPatch):
    """And its retention: the log's for what the consumers read; the data's for the dead letters,
    which wait on their topic until someone reads and replays them."""
    prefix = f"{namespace()}."
    monkeypatch.setenv("BLACKBOX_PROFILE", "services")
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", prefix)
    days = {prefix + t: str(retention_days(t, 90, 7)) for t in ALL_TOPICS}  # as the stack gives them
    properties = {"Partitions": "2", "RetentionDays": days}
    create_topics({"RequestType": "Create", "ResourceProperties": properties}, LocalContext("provisioning"))
    assert producer_config({}, 1)["message.max.bytes"] == MAX_MESSAGE_BYTES > MSK_DEFAULT_MAX_MESSAGE_BYTES
    for topic in ALL_TOPICS:
        found = topic_settings(prefix + topic)
        assert found["max.message.bytes"] == str(MAX_MESSAGE_BYTES), topic
        assert found["retention.ms"] == (str(90 * 86_400_000) if topic == DEADLETTER else RETENTION_MS), topic


def test_topics_take_the_clusters_replication_factor(monkeypatch: pytest.MonkeyPatch):
    """-1: the broker's default (MSK Serverless's 3); a hard-coded 1 would keep one copy in AWS."""
    made: list[NewTopic] = []

    class Recording(AdminClient):
        def create_topics(self, topics: list[NewTopic], **kwargs: float) -> dict[str, Future[None]]:
            made.extend(topics)
            return {}

    monkeypatch.setattr(kafka_log, "AdminClient", Recording)
    provision_topics({"bootstrap.servers": "127.0.0.1:1"}, {"a": 7, "b": 7}, 3)
    assert [(t.topic, t.num_partitions, t.replication_factor) for t in made] == [("a", 3, -1), ("b", 3, -1)]


@pytest.mark.services
def test_provisioning_gives_a_topic_made_without_them_its_limits():
    """A topic made by hand (or by an older deployment) would refuse the largest reports on MSK."""
    name = f"{namespace()}.{CRASHES}"
    client = admin()
    client.create_topics([NewTopic(name, 1)])[name].result(timeout=15)
    assert topic_settings(name)["max.message.bytes"] != str(MAX_MESSAGE_BYTES)
    provision_topics(plaintext(settings().kafka_bootstrap), {name: 7}, 1)
    found = topic_settings(name)
    assert found["max.message.bytes"] == str(MAX_MESSAGE_BYTES) and found["retention.ms"] == RETENTION_MS


def test_provisioning_tries_again_until_its_deadline():
    """A cold SASL_SSL client, or a cluster just created, may not answer the first admin request."""
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"in 4 s \(([2-9]|\d\d+) attempts\)"):
        provision_topics(plaintext("127.0.0.1:1"), {"never": 7}, 1, within_s=4, attempt_s=1)
    assert time.monotonic() - started >= 4


@pytest.mark.services
def test_a_topic_ensure_topic_makes_has_the_retention_of_its_records():
    """Found in review: serve's log made the dead letters' topic with the log's 7 days, where the
    deployment's custom resource gives it the data's 90."""
    prefix = f"{namespace()}."
    # ensure_topic's admin calls are bounded as a publish is (2 s): these tests are about the topics'
    # settings, which a broker busy with the rest of the suite took longer than that to change once
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=prefix, retention_days=7,
                        data_retention_days=90, publish_timeout_s=ADMIN_TIMEOUT_S)
    try:
        for topic in (CRASHES, DEADLETTER):
            log.ensure_topic(topic)
            assert topic_settings(prefix + topic)["retention.ms"] == str(retention_days(topic, 90, 7) * 86_400_000)
    finally:
        log.close()


@pytest.mark.services
def test_ensure_topic_gives_a_topic_made_before_the_limits_it_makes_one_with():
    """Found in review: serve used a topic made by hand (or by an older serve: the dead letters'
    with the log's 7 days) as it found it, so a large report capture accepted was refused by the
    topic, spilled, and refused again by every replay."""
    prefix = f"{namespace()}."
    client = admin()  # kept until the answer is in
    for topic in (CRASHES, DEADLETTER):
        client.create_topics([NewTopic(prefix + topic, 1, config={"max.message.bytes": "10000",
                                                                   "retention.ms": RETENTION_MS})])[
            prefix + topic].result(timeout=15)
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=prefix, retention_days=7,
                        data_retention_days=90, publish_timeout_s=ADMIN_TIMEOUT_S)
    try:
        for topic in (CRASHES, DEADLETTER):
            log.ensure_topic(topic)
            found = topic_settings(prefix + topic)
            assert found["max.message.bytes"] == str(MAX_MESSAGE_BYTES), topic
            assert found["retention.ms"] == str(retention_days(topic, 90, 7) * 86_400_000), topic
    finally:
        log.close()


@pytest.mark.services
def test_ensure_topic_never_shortens_what_a_topic_keeps():
    """Found in review: a command run with other settings than the serve's (blackbox lag, replay, a
    benchmark) gave the serve's topics its own, shorter, retention, and the broker then deleted
    records a lagging consumer had not read."""
    prefix = f"{namespace()}."
    client = admin()  # kept until the answer is in
    longer = str(30 * 86_400_000)
    client.create_topics([NewTopic(prefix + CRASHES, 1, config={"retention.ms": longer})])[
        prefix + CRASHES].result(timeout=15)
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=prefix, retention_days=7,
                        publish_timeout_s=ADMIN_TIMEOUT_S)
    try:
        log.ensure_topic(CRASHES)
        found = topic_settings(prefix + CRASHES)
        assert found["retention.ms"] == longer and int(found["max.message.bytes"]) >= MAX_MESSAGE_BYTES
    finally:
        log.close()


@pytest.mark.services
def test_the_largest_report_goes_onto_a_topic_ensure_topic_made(tmp_path: Path):
    """A body at the limit, incompressible, in its envelope: above MSK Serverless's default
    max.message.bytes, within the producer's and the topic's."""
    body = json.dumps(crash(random.Random(7), "limits:pc", MAX_BODY_BYTES - 2048)).encode()
    body += b" " * (MAX_BODY_BYTES - len(body))
    prefix = f"{namespace()}."
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=prefix)
    spill = DirectorySpillStore(tmp_path / "spill")
    try:
        capture.crash(log, spill, Posted(body, "application/json"))
        assert spill.list(10) == []  # the log took it
        assert topic_settings(prefix + CRASHES)["max.message.bytes"] == str(MAX_MESSAGE_BYTES)
        record = log.read(CRASHES, 0, 0)
        assert record is not None and record.value.endswith(body + b"}")
        assert len(record.value) > MSK_DEFAULT_MAX_MESSAGE_BYTES
    finally:
        log.close()


@pytest.mark.services
def test_what_the_log_confirmed_of_a_request_is_not_spilled_too(tmp_path: Path):
    """Found in review: a request of several records (several skus, or boards) whose publish failed
    for some spilled all of them, so those the log had taken came twice once the spill was replayed,
    and a record without an Idempotency-Key was counted twice. Here the topic refuses the large one."""
    prefix = f"{namespace()}."
    name = prefix + SESSIONS
    client = admin()  # kept until the answer is in
    client.create_topics([NewTopic(name, 2, config={"max.message.bytes": "10000"})])[name].result(timeout=15)
    # as in AWS, where the deployment makes the topics: this serve's log would give it its own limit
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=2, topic_prefix=prefix,
                        create_topics=False)
    large = random.Random(3).randbytes(50_000)  # past the topic's limit however the producer compresses it
    records, on_log, spilled = _published(log, tmp_path, 16, large, at=3)
    assert large in spilled and on_log  # the large one refused, the other partition's taken
    assert len(spilled) == len(set(spilled)) and not on_log & set(spilled)
    assert on_log | set(spilled) == {r.value for r in records}


@pytest.mark.services
def test_a_record_the_producer_refuses_at_once_spills_with_those_after_it_alone(tmp_path: Path):
    """Left alone in a note, then mended: a record librdkafka refused as it was produced (past the
    producer's own limit) raised out of the publish, and every record of the request spilled, those
    produced before it and confirmed too."""
    prefix = f"{namespace()}."
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=2, topic_prefix=prefix)
    records, on_log, spilled = _published(log, tmp_path, 8, random.Random(5).randbytes(MAX_MESSAGE_BYTES + 1_000), at=4)
    assert on_log == {r.value for r in records[:4]}
    assert sorted(spilled) == sorted(r.value for r in records[4:])


@pytest.mark.services
def test_a_record_past_what_its_topic_takes_is_refused_as_a_value_and_its_spill_set_aside(tmp_path: Path):
    """Found from outside: a record the log refuses for its size (a topic made with a smaller limit,
    kept by a user that may not alter topics) raised as the log being away; capture spilled it, and
    every replay then stopped at it, so the spills after it were never replayed."""
    prefix = f"{namespace()}."
    name = prefix + CRASHES
    client = admin()  # kept until the answer is in
    client.create_topics([NewTopic(name, 1, config={"max.message.bytes": "10000"})])[name].result(timeout=15)
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=1, topic_prefix=prefix, create_topics=False)
    spill = DirectorySpillStore(tmp_path / "spill")
    large = OutgoingRecord(random.Random(3).randbytes(50_000))
    try:
        with pytest.raises(ValueRefused, match="MSG_SIZE_TOO_LARGE"):  # by the broker
            log.publish(CRASHES, [large])
        with pytest.raises(ValueRefused, match="MSG_SIZE_TOO_LARGE"):  # by the producer, before it is sent
            log.publish(CRASHES, [OutgoingRecord(random.Random(5).randbytes(MAX_MESSAGE_BYTES + 1_000))])
        publish(log, spill, CRASHES, [large])  # spilled: accepted all the same
        spill.put(CRASHES, OutgoingRecord(b"spilled after it"))
        assert replay_spilled(log, spill) == 1
        assert [r.value for r in _read_all(log, CRASHES, 0)] == [b"spilled after it"]
        assert spill.list(10) == []
        assert spill.purge(now_ms() + 1) == 1  # the large one, kept until then for the operator
    finally:
        log.close()


def _published(log: KafkaEventLog, tmp_path: Path, count: int, large: bytes,
               at: int) -> tuple[list[OutgoingRecord], set[bytes], list[bytes]]:
    """`count` small records and `large` among them at `at`, as capture publishes them (closing the
    log after): the records, the values the log holds, and those spilled."""
    spill = DirectorySpillStore(tmp_path / "spill")
    records = [OutgoingRecord(value=f"small {i}".encode(), key=f"k{i}".encode()) for i in range(count)]
    records.insert(at, OutgoingRecord(value=large, key=b"large"))
    try:
        publish(log, spill, SESSIONS, records)
        on_log = {r.value for p in range(2) for r in _read_all(log, SESSIONS, p)}
    finally:
        log.close()
    return records, on_log, [item.record.value for item in spill.list(100)]


def _read_all(log: KafkaEventLog, topic: str, partition: int) -> list[LogRecord]:
    found, offset = [], 0
    while (record := log.read(topic, partition, offset)) is not None:
        found.append(record)
        offset += 1
    return found


@pytest.mark.services
def test_a_topic_with_fewer_partitions_than_the_setting_is_named_not_grown(caplog: pytest.LogCaptureFixture):
    """Found by a probe of docs/scale-out.md: BLACKBOX_LOG_PARTITIONS raised after the topics were
    made changed nothing, without a word. Serve adds none itself: a key's records would go to
    another partition from then on, behind the ones still waiting on the old."""
    prefix = f"{namespace()}."
    logs = [KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=n, topic_prefix=prefix) for n in (2, 6)]
    try:
        logs[0].ensure_topic(CRASHES)
        logs[1].ensure_topic(CRASHES)
        client = admin()
        assert len(client.list_topics(prefix + CRASHES, timeout=10).topics[prefix + CRASHES].partitions) == 2
        assert f"topic {prefix}{CRASHES} has 2 partitions where BLACKBOX_LOG_PARTITIONS asks 6" in caplog.text
    finally:
        for log in logs:
            log.close()
