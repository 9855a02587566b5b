"""The event log on Apache Kafka (MSK in AWS) with confluent-kafka: an idempotent acks=all producer
whose publish returns only once the brokers confirmed every record, and consumer-group members
that commit only what they are told to."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from pipeline.topics import MINIDUMPS, READ_GROUP, retention_days
from ports import PUBLISH_TIMEOUT_S, LogRecord, OutgoingRecord, PartlyPublished
from ports.errors import ValueRefused
from ports.limits import MAX_BODY_BYTES

log = logging.getLogger(__name__)

# The largest record batch, for the producer (message.max.bytes) and every topic (max.message.bytes)
# alike: a body at the limit, in its envelope (a few hundred bytes), with headers, the batch's
# framing and what lz4 adds to an incompressible value (1/255) fit with room to spare. MSK
# Serverless's default (1048588) is below it, its maximum (8 MiB) far above.
MAX_MESSAGE_BYTES = MAX_BODY_BYTES + (64 << 10)
# records taken from the client's buffer at a time while a batch fills
CHUNK_RECORDS = 64
SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 1_000
READ_TIMEOUT_S = 10.0
# how long a member may take over a batch before the group hands its partitions to another (one that
# hangs holds them that long; one that dies is found by its session timeout): librdkafka's default,
# but for the minidump processor's, whose batch of 5 reports, each walked up to 3 times
# (crashes.processing.WALKS) in 60 s of wall time at most (ports.minidumps.WALK_WALL_S) with the
# symbol files' fetches, may take 900 s and more
POLL_INTERVAL_MS = 300_000
WALKS_POLL_INTERVAL_MS = 1_200_000
# librdkafka's close waits without a timeout, for the group and the commits under way; a commit
# has been seen never to return while the group rebalanced (CI; confluent-kafka-python#1801). This
# bounds the wait: librdkafka holds a commit back for up to a session timeout while the group has
# no coordinator, and then fails it; one not answered well past that is not coming.
CLOSE_TIMEOUT_S = SESSION_TIMEOUT_MS / 1000 + 5
# A member whose group has had no coordinator this long joins it again with a new client: after a
# broker's restart librdkafka 2.16 was seen to keep members without a broker to ask for one, for
# good (the fault suite's Kafka outage). Well past a session timeout and a broker's restart; the
# statistics that tell come this often.
STALLED_S = 60.0
STATS_INTERVAL_MS = 5_000
# A commit refused for a passing cause (no coordinator yet, one still loading the group's offsets) is
# asked for again after this; one refused for good (a topic deleted, a permission missing) then
# costs a request and a warning this often, not a request a poll.
ASK_AGAIN_S = 1.0
# refusals that put the member out of the group: it joins again, and starts its partitions over
# at their committed offsets, so those are not asked for again
_PUT_OUT = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.FENCED_INSTANCE_ID,
            KafkaError.REBALANCE_IN_PROGRESS}
# The deploy's admin requests (provision_topics): the first from a cold SASL_SSL client signs an IAM
# token, shakes hands and finds the controller, well past what a publish may wait; a cluster just
# created may take minutes to answer at all.
ADMIN_TIMEOUT_S = 30.0
PROVISION_WITHIN_S = 240.0
# what passes: brokers not reachable yet, no controller yet, a request that timed out
_TRANSIENT = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
              KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER}
# what a record's own bytes cause, by the producer (past message.max.bytes) or a topic's broker: the
# same record is refused again however often it is sent
_REFUSALS = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD}


def producer_config(client_config: dict[str, Any], publish_timeout_s: float) -> dict[str, Any]:
    """What capture produces with: every in-sync replica confirms, no duplicates on retry."""
    return {
        **client_config,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "compression.type": "lz4",
        "message.max.bytes": MAX_MESSAGE_BYTES,
        # a record not confirmed in time is expired, not delivered later: capture spills it instead
        "message.timeout.ms": int(publish_timeout_s * 1000),
    }


_NO_SUCH_PARTITION = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
                                KafkaError.UNKNOWN_TOPIC_OR_PART})


class PublishTimeout(TimeoutError):
    pass


T = TypeVar("T")


def _within(call: Callable[[], T], timeout_s: float, name: str) -> T:
    """`call`'s result, waited for `timeout_s` at most (TimeoutError after), the call running on a
    daemon thread of its own: one that never returns is left behind there and does not keep the
    process from exiting."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future.result(timeout_s)


def topic_config(retention_days: int) -> dict[str, str]:
    return {"retention.ms": str(retention_days * 86_400_000), "max.message.bytes": str(MAX_MESSAGE_BYTES)}


def _create_topics(admin: AdminClient, configs: Mapping[str, dict[str, str]], partitions: int,
                   timeout_s: float) -> list[str]:
    """Creates the topics of `configs` (name → configuration) that do not exist, with the broker's
    default replication factor (-1: MSK Serverless's 3, a single local broker's 1); returns those
    that existed already."""
    futures = admin.create_topics([NewTopic(name, partitions, config=config) for name, config in configs.items()],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    existing = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s + 1)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            existing.append(name)
    return existing


def _configure_topics(admin: AdminClient, configs: Mapping[str, dict[str, str]], timeout_s: float) -> None:
    resources = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in config.items()])
        for name, config in configs.items()]
    for future in admin.incremental_alter_configs(resources, request_timeout=timeout_s).values():
        future.result(timeout=timeout_s + 1)


def _raise_limits(admin: AdminClient, name: str, config: dict[str, str], timeout_s: float) -> None:
    """Gives an existing topic those of `config`'s limits (numbers) it has lower, and keeps those it
    has higher or unbounded (-1): a process with other settings than the serve's (a command, a
    benchmark) must not shorten what the serve's topics keep."""
    [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=timeout_s).values()
    found = {key: entry.value for key, entry in future.result(timeout=timeout_s + 1).items()}
    lower = {key: value for key, value in config.items()
             if key in found and found[key] is not None and int(found[key]) != -1 and int(found[key]) < int(value)}
    if lower:
        _configure_topics(admin, {name: lower}, timeout_s)


def provision_topics(client_config: dict[str, Any], retention_days: Mapping[str, int], partitions: int, *,
                     within_s: float = PROVISION_WITHIN_S, attempt_s: float = ADMIN_TIMEOUT_S) -> None:
    """What the deployment runs: creates the topics (name → days kept), and gives those that exist
    already the configuration they would have been created with (a topic made by an older
    deployment, or by hand, would otherwise refuse the largest records). A transient failure is
    tried again until `within_s` has passed; a refusal (authorization, an invalid setting) is
    raised at once."""
    admin = AdminClient(client_config)
    configs = {name: topic_config(days) for name, days in retention_days.items()}
    deadline = time.monotonic() + within_s
    attempts = 0
    while True:
        attempts += 1
        timeout_s = max(1.0, min(attempt_s, deadline - time.monotonic()))
        try:
            existing = _create_topics(admin, configs, partitions, timeout_s)
            if existing:
                _configure_topics(admin, {name: configs[name] for name in existing}, timeout_s)
            return
        except (KafkaException, TimeoutError) as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and not (error.retriable() or error.code() in _TRANSIENT):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"topics not provisioned in {within_s:g} s ({attempts} attempts); "
                                   f"the last error: {exc!r}") from exc
            log.warning("Kafka did not provision the topics yet, trying again: %r", exc)
            time.sleep(min(1.0, left))


def _log_record(topic: str, message: Message) -> LogRecord:
    return LogRecord(
        topic=topic,
        partition=_int(message.partition()),
        offset=_int(message.offset()),
        value=message.value() or b"",
        key=message.key(),
        headers=_headers(message),
        timestamp_ms=message.timestamp()[1],
    )


def _int(value: int | None) -> int:
    """Partition and offset are set on every message that has no error."""
    assert value is not None
    return value


def _headers(message: Message) -> tuple[tuple[str, bytes], ...]:
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v or b"") for k, v in pairs)


class KafkaEventLog:
    def __init__(
        self,
        client_config: dict[str, Any],
        *,
        partitions: int = 4,
        topic_prefix: str = "",
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
        create_topics: bool = True,
        retention_days: int = 7,
        data_retention_days: int = 90,
    ) -> None:
        """`client_config` holds bootstrap.servers and security settings (see adapters.kafka.auth);
        `topic_prefix` lets several deployments share one cluster. Without `create_topics` the topics
        must exist (in AWS the deployment makes them, and the functions may not create any). Topics
        it creates keep records `retention_days`, the dead letters `data_retention_days`
        (pipeline.topics.retention_days)."""
        self._retention_days = retention_days
        self._data_retention_days = data_retention_days
        self._create_topics = create_topics
        self._config = client_config
        self._partitions = partitions
        self._prefix = topic_prefix
        self._timeout = publish_timeout_s
        self._made: Producer | None = None
        self._making = threading.Lock()
        self._admin = AdminClient(client_config)
        self._known_topics: set[str] = set()
        self._topics_lock = threading.Lock()
        self._running = True
        self._poller: threading.Thread | None = None

    @property
    def _producer(self) -> Producer:
        """Made at the first publish: an idempotent producer asks the cluster for its id as it is
        made, which MSK refuses a role that may only read (the reporter's in AWS)."""
        made = self._made
        if made is not None:
            return made
        with self._making:
            if self._made is None:
                self._made = Producer(producer_config(self._config, self._timeout))
                # delivery reports are served by this thread, so publishers only wait for their own
                self._poller = threading.Thread(target=self._serve_delivery_reports, args=(self._made,),
                                                name="kafka-delivery", daemon=True)
                self._poller.start()
            return self._made

    def _serve_delivery_reports(self, producer: Producer) -> None:
        while self._running:
            producer.poll(0.05)

    def _name(self, topic: str) -> str:
        return self._prefix + topic

    def ensure_topic(self, topic: str) -> None:
        """Creates the topic, or gives it the limits it would have been created with when it exists
        (in AWS the deployment does both, as provision_topics)."""
        name = self._name(topic)
        with self._topics_lock:
            if name in self._known_topics or not self._create_topics:
                return
            # bounded like a publish: with the broker away, capture must get to spill quickly
            config = {name: topic_config(retention_days(topic, self._data_retention_days, self._retention_days))}
            if _create_topics(self._admin, config, self._partitions, self._timeout):
                try:
                    _raise_limits(self._admin, name, config[name], self._timeout)
                except (KafkaException, TimeoutError) as exc:
                    # a user that may not alter topics (an ACL) still publishes, as before, to the
                    # topic as it is; what it refuses is spilled, and this line says why
                    log.warning("topic %s kept the limits it had; giving it %s failed: %r", name, config[name], exc)
                self._warn_if_fewer_partitions(name)
            self._known_topics.add(name)

    def _warn_if_fewer_partitions(self, name: str) -> None:
        """Says so when a topic made before has fewer partitions than the setting asks. None is
        added here: from then on a key's records would go to another partition, to be consumed
        before the ones still waiting on the old (a board's scores out of order)."""
        try:
            metadata = self._admin.list_topics(name, timeout=self._timeout).topics.get(name)
        except KafkaException:  # only a diagnosis: the publish goes on, and fails or not on its own
            return
        found = len(metadata.partitions) if metadata is not None and metadata.error is None else self._partitions
        if found < self._partitions:
            log.warning("topic %s has %d partitions where BLACKBOX_LOG_PARTITIONS asks %d; serve adds none: add them "
                        "with Kafka's tools while `blackbox lag` shows every group caught up", name, found,
                        self._partitions)

    def publish(self, topic: str, records: Sequence[OutgoingRecord]) -> None:
        if not records:
            return
        self.ensure_topic(topic)
        pending = len(records)
        errors: list[KafkaError] = []
        confirmed: set[int] = set()
        done = threading.Event()
        lock = threading.Lock()

        def delivered(index: int, error: KafkaError | None, _: Message) -> None:
            nonlocal pending
            with lock:
                if error is None:
                    confirmed.add(index)
                else:
                    errors.append(error)
                pending -= 1
                if pending == 0:
                    done.set()

        failure: Exception | None = None
        for index, record in enumerate(records):
            try:
                self._produce(topic, record, functools.partial(delivered, index))
            except KafkaException as exc:  # refused as produced (past the producer's limit): those before it may go
                failure = exc
                with lock:
                    pending -= len(records) - index
                    if pending == 0:
                        done.set()
                break
        # librdkafka reports the expiry itself; the extra second only guards against a lost report
        if not done.wait(self._timeout + 1):
            failure = PublishTimeout(f"{pending} of {len(records)} records not confirmed in {self._timeout} s")
        elif errors and failure is None:
            failure = KafkaException(errors[0])
        if failure is None:
            return
        with lock:
            unconfirmed = [index for index in range(len(records)) if index not in confirmed]
        if len(unconfirmed) < len(records):
            raise PartlyPublished(f"{len(unconfirmed)} of {len(records)} records not confirmed: {failure!r}",
                                  unconfirmed) from failure
        if isinstance(failure, KafkaException) and all(e.code() in _REFUSALS for e in (*errors, failure.args[0])):
            refusal: KafkaError = failure.args[0]
            raise ValueRefused(f"{refusal.name()}: {refusal.str()}") from failure
        raise failure

    def _produce(self, topic: str, record: OutgoingRecord, on_delivery: Callable[..., None]) -> None:
        while True:
            try:
                self._producer.produce(
                    self._name(topic), value=record.value, key=record.key, headers=list(record.headers),
                    on_delivery=on_delivery,
                )
                return
            except BufferError:  # the local queue is full: wait for deliveries to drain it
                self._producer.poll(0.05)

    def consumer(self, group: str, topic: str) -> KafkaLogConsumer:
        self.ensure_topic(topic)
        return KafkaLogConsumer(self._config, self._name(group), self._name(topic), topic)

    def read(self, topic: str, partition: int, offset: int) -> LogRecord | None:
        """A consumer of no group, assigned the one partition: rare (a consumer checking a stored
        offset), so it is made for the call."""
        name = self._name(topic)
        reader = Consumer({**self._config, "group.id": self._name(READ_GROUP), "enable.auto.commit": False,
                           "fetch.message.max.bytes": MAX_MESSAGE_BYTES,
                           "max.partition.fetch.bytes": MAX_MESSAGE_BYTES})
        try:
            try:
                low, high = reader.get_watermark_offsets(TopicPartition(name, partition), timeout=READ_TIMEOUT_S)
            except KafkaException as exc:
                # no such topic (reads make none) or partition: so the cluster says, where a broker
                # just started again answers as much of topics it has not loaded yet
                if exc.args[0].code() in _NO_SUCH_PARTITION and not self._has_partition(name, partition):
                    return None
                raise
            if not low <= offset < high:
                return None
            reader.assign([TopicPartition(name, partition, offset)])
            deadline = time.monotonic() + READ_TIMEOUT_S
            while time.monotonic() < deadline:
                message = reader.poll(0.5)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.fatal() or not error.retriable():
                        raise KafkaException(error)
                    continue
                return _log_record(topic, message) if message.offset() == offset else None
            raise TimeoutError(f"{topic}-{partition}: offset {offset} not read within {READ_TIMEOUT_S} s")
        finally:
            try:  # its close waits for the group's coordinator, without a timeout
                _within(reader.close, CLOSE_TIMEOUT_S, f"kafka-read-close-{topic}")
            except TimeoutError:
                log.warning("%s: a reader did not close in %g s; left behind", topic, CLOSE_TIMEOUT_S)

    def _has_partition(self, name: str, partition: int) -> bool:
        """False only when the cluster has no such topic, or no such partition of it: a topic it
        answers with another error (no leader yet) it has."""
        metadata = self._admin.list_topics(timeout=10).topics.get(name)
        if metadata is None:
            return False
        if metadata.error is not None:
            return bool(metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART)
        return partition in metadata.partitions

    def purge(self, topics: Sequence[str], before_ms: int, readers: Mapping[str, str] | None = None) -> int:
        """Deletes records up to the first at or after `before_ms` (DeleteRecords); the topics'
        retention.ms also expires them, in whole segments and on the broker's schedule (which
        waits for no reader: that is the log's retention)."""
        names = [self._name(t) for t in topics]
        metadata = self._admin.list_topics(timeout=10).topics
        partitions = [(n, p) for n in names if n in metadata for p in metadata[n].partitions]
        if not partitions:
            return 0
        earliest = self._offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
        latest = self._offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
        cut = self._offsets(partitions, OffsetSpec.for_timestamp(before_ms))
        # no record at or after the time (-1): everything before the end goes
        targets = {tp: latest[tp] if cut[tp] < 0 else cut[tp] for tp in partitions}
        # no further than a topic's reader committed
        committed = {self._name(t): self.committed(group, t) for t, group in (readers or {}).items() if t in topics}
        targets = {(name, p): min(target, committed[name].get(p, 0)) if name in committed else target
                   for (name, p), target in targets.items()}
        doomed = {tp: offset for tp, offset in targets.items() if offset > earliest[tp]}
        if not doomed:
            return 0
        requests = [TopicPartition(topic, partition, offset) for (topic, partition), offset in doomed.items()]
        for future in self._admin.delete_records(requests, request_timeout=30).values():
            future.result()
        return sum(offset - earliest[tp] for tp, offset in doomed.items())

    def end_offsets(self, topic: str) -> dict[int, int]:
        return self._each_partitions(topic, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def start_offsets(self, topic: str) -> dict[int, int]:
        return self._each_partitions(topic, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def _each_partitions(self, topic: str, spec: OffsetSpec) -> dict[int, int]:
        # a topic that does not exist is not made: none of its partitions has offsets (and a
        # mistyped prefix would leave topics behind). Found among all: a broker that makes topics as
        # they are named (auto.create.topics.enable) would make one asked for by name
        name = self._name(topic)
        metadata = self._admin.list_topics(timeout=10).topics.get(name)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return {}
        partitions = [(name, p) for p in metadata.partitions]
        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            try:
                found = self._offsets(partitions, spec)
                return {partition: offset for (_, partition), offset in found.items()}
            except KafkaException:
                # a topic just created has no leader for a moment (NOT_LEADER_FOR_PARTITION, which
                # the admin client does not mark retriable)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def committed(self, group: str, topic: str) -> dict[int, int]:
        name, group_name = self._name(topic), self._name(group)
        futures = self._admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_name)],
                                                          request_timeout=30)
        found = futures[group_name].result().topic_partitions or []
        # a partition the group has no offset for comes as a negative one (OFFSET_INVALID)
        return {tp.partition: tp.offset for tp in found if tp.topic == name and tp.offset >= 0}

    def _offsets(self, partitions: Sequence[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, request_timeout=30)
        return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}

    def ping(self) -> None:
        self._admin.list_topics(timeout=5)

    def close(self) -> None:
        self._running = False
        with self._making:
            if self._poller is not None and self._made is not None:
                self._poller.join()
                self._made.flush(self._timeout)


def consumer_config(client_config: dict[str, Any], group: str, topic: str) -> dict[str, Any]:
    """What a member of `group` consumes `topic` (the log's name) with: it commits only what it is
    told to."""
    return {
        "max.poll.interval.ms": WALKS_POLL_INTERVAL_MS if topic == MINIDUMPS else POLL_INTERVAL_MS,
        **client_config,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.message.max.bytes": MAX_MESSAGE_BYTES,
        "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
        # a member that died (SIGKILL, its machine lost) keeps its partitions this long before
        # the others take them over: Kafka's former default, rather than librdkafka's 45 s
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        # and the members learn of a rebalance (one joined, left or died) within this
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    }


def _later(some: Mapping[int, int], others: Mapping[int, int]) -> dict[int, int]:
    """Each partition's furthest offset of the two."""
    return {**some, **{p: max(o, some.get(p, o)) for p, o in others.items()}}


class KafkaLogConsumer:
    """A member of the group: the group's coordinator hands it partitions and takes them away when
    members join, leave or die. Nothing is committed but what the caller commits, and a partition
    always starts at its committed offset, whoever had it before."""

    def __init__(self, config: dict[str, Any], group: str, topic: str, logical_topic: str) -> None:
        self._topic = topic
        self._logical_topic = logical_topic
        self._config = {**consumer_config(config, group, logical_topic), "statistics.interval.ms": STATS_INTERVAL_MS}
        self._consumer = self._join()
        # since when the statistics say the group has had no coordinator (librdkafka's clock, µs)
        self._down_from: int | None = None
        self._stalled = False
        self._revoked = False
        # one commit asked for at a time (an older one retried could land after a newer one, and move
        # the group back); what is committed meanwhile waits here, partition → next offset
        self._asked: float | None = None  # when (monotonic)
        self._asking: dict[int, int] = {}  # what
        self._waiting: dict[int, int] = {}
        self._refused: set[int] = set()  # partitions whose last answer refused them for good
        # partitions the group took for lost (this member put out): their next owner starts at the
        # committed offsets, so what this member applied there is not its to commit any more
        self._lost: set[int] = set()
        self._dropped = False  # offsets left with a stalled client (_join_again) not committed
        self._again_at = 0.0  # what a refusal gave back waits till then (monotonic)

    def _join(self) -> Consumer:
        """A client of its own in the group. The callbacks of one replaced (_join_again) go unheard:
        its close serves them, on another thread."""
        made: list[Consumer] = []

        def mine(callback: Callable[..., None]) -> Callable[..., None]:
            return lambda *args: callback(*args) if made[0] is self._consumer else None

        consumer = Consumer({**self._config, "on_commit": mine(self._on_commit), "stats_cb": mine(self._on_stats)})
        made.append(consumer)
        # the library unassigns by itself after the callbacks
        consumer.subscribe([self._topic], on_assign=mine(self._on_assign), on_revoke=mine(self._on_revoke),
                           on_lost=mine(self._on_lost))
        return consumer

    def _on_stats(self, stats: str) -> None:
        """librdkafka's statistics, served within consume(): timed by its own clock, so that those
        served late, after a long batch, tell what was so when they were made."""
        report = json.loads(stats)
        group = report.get("cgrp", {})
        if group.get("state", "up") == "up":
            self._down_from = None
        elif self._down_from is None:
            self._down_from = report["ts"] - group["stateage"] * 1000
        self._stalled = self._down_from is not None and report["ts"] - self._down_from > STALLED_S * 1e6

    def _join_again(self) -> None:
        """A new client in the group in place of one stalled, which the group took for gone and took
        its partitions from: whoever holds them now starts at their committed offsets, and skips
        what was applied."""
        left = sorted(self._unanswered() | (self._refused - self._lost))
        log.warning("%s: the group has had no coordinator for %g s; the consumer joins it again with a new "
                    "client%s", self._logical_topic, STALLED_S,
                    f" (offsets not committed of partitions {left}: consumed again, and skipped)" if left else "")
        stalled, self._consumer = self._consumer, self._join()
        self._dropped = self._dropped or bool(left)
        self._down_from, self._stalled, self._lost = None, False, set()
        self._asked, self._asking, self._waiting, self._refused = None, {}, {}, set()
        # not waited for: the group lost it (poll() checks it holds nothing), so its close makes no
        # rebalance to hang in (librdkafka#4884); a commit of it still waiting for a coordinator
        # holds it a session timeout
        threading.Thread(target=stalled.close, name=f"kafka-close-stalled-{self._logical_topic}",
                         daemon=True).start()

    def _on_revoke(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        """Called from within consume(), so only while a batch fills, never while the caller
        handles one: a batch it was handed is its own to finish and commit (a commit still waiting
        goes now, if it may: the group waits for the commits under way before it moves partitions)."""
        self._revoked = True
        self._ask()

    def _on_lost(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        """As a revocation, but the group put this member out first: its commits are refused."""
        self._revoked = True
        self._lost |= {tp.partition for tp in partitions}
        self._waiting = {p: o for p, o in self._waiting.items() if p not in self._lost}
        self._refused -= self._lost

    def _on_assign(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self._lost -= {tp.partition for tp in partitions}

    def poll(self, max_records: int, max_bytes: int, timeout_s: float) -> list[LogRecord]:
        """A batch, or none when the group took partitions away while it filled: what was taken of
        them is another member's now, and handing it to the handler would commit offsets there; what
        came after a partition was given back starts at its committed offset again, so it could
        repeat what the batch holds. So the batch is dropped, and every partition held now goes back
        to its committed offset."""
        self._revoked = False
        if self._stalled and not self._consumer.assignment():
            self._join_again()
            return []
        self._ask()
        batch = self._fill(max_records, max_bytes, timeout_s)
        if self._revoked:
            self.rewind()
            return []
        return batch

    def _fill(self, max_records: int, max_bytes: int, timeout_s: float) -> list[LogRecord]:
        """Waits up to `timeout_s` for a first record, then takes what the client already holds, in
        small chunks sized to the bytes left: consume() of a whole batch would wait out its timeout
        whenever fewer records are there, and what does not fit has to be fetched again."""
        batch: list[LogRecord] = []
        size = largest = 0
        messages = self._consumer.consume(num_messages=1, timeout=timeout_s)
        while messages and not self._revoked:
            for i, message in enumerate(messages):
                error = message.error()
                if error is not None:
                    if error.fatal() or not error.retriable():
                        raise KafkaException(error)
                    continue
                value = message.value() or b""
                if batch and size + len(value) > max_bytes:
                    self._seek_to_first_of(messages[i:])
                    return batch
                size += len(value)
                largest = max(largest, len(value))
                batch.append(_log_record(self._logical_topic, message))
            # stop once the largest record would not fit: taking one to try costs a seek back, which
            # drops the partition's prefetched records, and the next poll waits for a fetch again
            room = min(max_records - len(batch), CHUNK_RECORDS, (max_bytes - size) // max(1, largest))
            if room <= 0:
                break
            messages = self._consumer.consume(num_messages=room, timeout=0)
        return batch

    def _seek_to_first_of(self, messages: Sequence[Message]) -> None:
        """Hands back what did not fit: each partition resumes at its first record left over."""
        first: dict[int, int] = {}
        for message in messages:
            if message.error() is None:
                first.setdefault(_int(message.partition()), _int(message.offset()))
        for partition, offset in first.items():
            self._consumer.seek(TopicPartition(self._topic, partition, offset))

    def commit(self, records: Sequence[LogRecord]) -> None:
        """Asks the group's coordinator to store the offsets past `records`, and returns. Not waited
        for: librdkafka's synchronous commit has been seen never to return (confluent-kafka-python#1801),
        and since confluent-kafka 2.16 every other call on the consumer waits behind it, so that a
        bound on another thread bounded nothing (the fault suite's Kafka outage left a worker waiting
        for good to rewind, most likely so). While one commit is under way the next waits, merged
        with any after it, and goes at the next poll once the first is answered. A commit refused or
        lost is logged (_on_commit) and asked for again (_ask), but for one refused because the group
        put the member out: the partitions' next owner starts before what was applied, which the
        stored offsets skip (rules 3 and 4 of docs/architecture.md). close() sends what waits and
        waits for the answers."""
        for record in records:
            self._waiting[record.partition] = max(self._waiting.get(record.partition, 0), record.offset + 1)
        self._ask()

    def _ask(self) -> None:
        if self._asked is not None:
            # one not answered in CLOSE_TIMEOUT_S is not coming (librdkafka fails a commit held back
            # for want of a coordinator within a session timeout): its offsets are asked for again,
            # with what came since, also when nothing did
            if time.monotonic() - self._asked < CLOSE_TIMEOUT_S:
                return
            self._waiting = _later(self._asking, self._waiting)
        self._waiting = {p: o for p, o in self._waiting.items() if p not in self._lost}
        if not self._waiting or time.monotonic() < self._again_at:
            return
        offsets = [TopicPartition(self._topic, p, o) for p, o in self._waiting.items()]
        self._consumer.commit(offsets=offsets, asynchronous=True)
        self._asked, self._asking, self._waiting = time.monotonic(), self._waiting, {}

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """A commit's answer, served within consume() and close()."""
        if (answered := {tp.partition: tp.offset for tp in partitions}) and answered != self._asking:
            return  # a late answer to one taken for lost: the one asked since carries its offsets on
        asked, self._asked, self._asking = self._asking, None, {}
        failed = {tp.partition: tp.error for tp in partitions if tp.error is not None}
        if error is not None:
            failed = dict.fromkeys(asked, error) | failed
        again = {p: asked[p] for p, why in failed.items() if p in asked and why.code() not in _PUT_OUT}
        self._refused = (self._refused - asked.keys()) | (failed.keys() - again.keys() - self._lost)
        if not failed:
            return
        self._waiting, self._again_at = _later(again, self._waiting), time.monotonic() + ASK_AGAIN_S
        log.warning("%s: offsets not committed (%s); %s", self._logical_topic,
                    ", ".join(f"{p}: {why}" for p, why in sorted(failed.items())),
                    "asked for again" if len(again) == len(failed) else "whoever consumes the partitions next "
                    "starts before them, and skips what was applied")

    def rewind(self) -> None:
        assigned = self._consumer.assignment()
        if not assigned:
            return
        for tp in self._consumer.committed(assigned, timeout=10):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def close(self) -> bool:
        """Leaves the group, which librdkafka does only once no commit is outstanding: a member
        whose commit never returned is dropped by the group after its session timeout instead.
        Whether the offsets of what it consumed are the group's (but on partitions the group took
        for lost), left in time or not: a leave that a coordinator still loading does not answer
        delays the partitions' next owner, and moves no offset."""
        try:
            _within(self._leave, CLOSE_TIMEOUT_S, f"kafka-close-{self._logical_topic}")
        except TimeoutError:
            asked = self._asked
            log.warning("%s: the consumer did not leave its group in %g s; the group drops it after "
                        "its session timeout (%s)", self._logical_topic, CLOSE_TIMEOUT_S,
                        "no commit was under way" if asked is None else
                        f"a commit asked {time.monotonic() - asked:.1f} s before had no answer")
        return not self._unanswered() and not self._refused - self._lost and not self._dropped

    def _unanswered(self) -> set[int]:
        """The partitions whose offsets this member has yet to ask for, or to hear of."""
        return (self._asking.keys() | self._waiting.keys()) - self._lost

    def _leave(self) -> None:
        """Gives its partitions back in consume() before closing: the rebalance close() makes itself
        can hang for good (librdkafka#4884), holding the GIL, so no timeout of ours fires; served by
        consume() it does not (the workaround of librdkafka#4527)."""
        try:
            # half the bound on close: what is left of it is close()'s own
            deadline = time.monotonic() + CLOSE_TIMEOUT_S / 2
            while self._unanswered() and time.monotonic() < deadline:
                self._ask()  # what waits, once the commit under way is answered, served in consume()
                self._consumer.consume(num_messages=CHUNK_RECORDS, timeout=0.1)  # not committed: dropped
            self._consumer.unsubscribe()
            while self._consumer.assignment() and time.monotonic() < deadline:
                self._consumer.consume(num_messages=CHUNK_RECORDS, timeout=0.1)  # not committed: dropped
        finally:
            self._consumer.close()
