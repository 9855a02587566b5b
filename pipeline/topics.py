"""Topic names and the dead-letter rule (rule 5 of docs/architecture.md: nothing is dropped silently)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import ValidationError

from pipeline.msk import correlation_ids
from ports import EventLog, LogRecord, OutgoingRecord, PartlyPublished, SpillStore
from ports.errors import Unavailable, ValueRefused
from ports.telemetry import (
    CORRELATION_HEADER,
    DEAD_LETTERS,
    SPILLED_EVENTS,
    SPILLS_SET_ASIDE,
    correlation_id,
    emit,
    logger,
)

CRASHES = "crashes"
SESSIONS = "sessions"
SCORES = "scores"
# the minidumps to walk: written by the crash consumer and by symbol uploads, not by capture
MINIDUMPS = "minidumps"
DEADLETTER = "deadletter"
# the topics a consumer reads, to which their dead letters and failed batches go back
CONSUMED = (CRASHES, SESSIONS, SCORES, MINIDUMPS)
ALL_TOPICS = (*CONSUMED, DEADLETTER)
# the header on what `blackbox replay` publishes again: consumers look up its eventIds (pipeline.offsets)
REPLAYED = "replayed"
_DEAD_LETTER_HEADERS = {"reason", "sourceTopic", "sourcePartition", "sourceOffset", REPLAYED}


def dead_letter(log: EventLog, rejected: Sequence[tuple[LogRecord, str]]) -> None:
    """Moves malformed records aside with the reason and where they came from, so a replay can
    find them and a duplicate (after a retried batch) can be recognised by its source."""
    if not rejected:
        return
    for record, reason in rejected:
        logger.warning("record set aside", extra={
            "topic": record.topic, "partition": record.partition, "offset": record.offset, "reason": reason,
            "correlationIds": correlation_ids([record]),
        })
    log.publish(
        DEADLETTER,
        [
            OutgoingRecord(
                value=record.value,
                key=record.key,
                # what it came with (its eventId, the request that sent it), then where and why
                headers=(
                    *(h for h in record.headers if h[0] not in _DEAD_LETTER_HEADERS),
                    ("reason", reason.encode()),
                    ("sourceTopic", record.topic.encode()),
                    ("sourcePartition", str(record.partition).encode()),
                    ("sourceOffset", str(record.offset).encode()),
                ),
            )
            for record, reason in rejected
        ],
    )
    emit(DEAD_LETTERS, len(rejected), source=rejected[0][0].topic)


T = TypeVar("T")


class Refused(ValueError):
    """A record a consumer's own rule refuses (malformed, a reused key): its message is the dead
    letter's reason, and the failure rule (pipeline.failures) sets the record aside alone."""


def parse_each(records: Sequence[LogRecord], parse: Callable[[bytes], T], what: str) -> list[T]:
    """Each record's value parsed, in order; Refused for the first that does not parse."""
    parsed: list[T] = []
    for record in records:
        try:
            parsed.append(parse(record.value))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise Refused(f"malformed {what} record: {where + ': ' if where else ''}{first['msg']}") from None
    return parsed


def publish(log: EventLog, spill: SpillStore, topic: str, records: Sequence[OutgoingRecord]) -> None:
    """Capture's write: durable on the log, or else in the spill store until `blackbox replay`
    (docs/architecture.md); only when both fail a 503 the client may retry, as nothing was promised. Each record
    carries the id of the request that sent it, for the consumers' log."""
    request = correlation_id()
    if request is not None:
        header = (CORRELATION_HEADER, request.encode())
        records = [OutgoingRecord(r.value, r.key, (*r.headers, header)) for r in records]
    try:
        log.publish(topic, records)
        return
    except Exception as log_error:
        logger.warning("event log did not take the event; spilling it", extra={"error": repr(log_error)})
        # what the log confirmed is on it: spilled too, a replay would send it twice
        left = ([records[i] for i in log_error.unconfirmed] if isinstance(log_error, PartlyPublished)
                else records)
        try:
            for record in left:
                spill.put(topic, record)
        except Exception as spill_error:
            # the stores' own words (hosts, paths, buckets) are for the operator, not the client
            logger.error("the spill store did not take the event either", extra={"error": repr(spill_error)})
            raise Unavailable("neither the event log nor the spill store took the event; try again") from None
        emit(SPILLED_EVENTS, len(left), topic=topic)


def marked_replayed(record: OutgoingRecord, origin: str) -> OutgoingRecord:
    """The record as it was first sent, marked: a consumer checks a replayed eventId whatever its
    kind, since a replay cut off midway sends the record again (pipeline.offsets)."""
    headers = tuple(h for h in record.headers if h[0] not in _DEAD_LETTER_HEADERS)
    return OutgoingRecord(record.value, record.key, (*headers, (REPLAYED, origin.encode())))


def replay_spilled(log: EventLog, spill: SpillStore, batch: int = 100,
                   going_on: Callable[[], bool] = lambda: True) -> int:
    """Publishes spilled events again, oldest first, while `going_on` (asked before each); each
    leaves the spill store once it is on the log, so a crash midway repeats at most one event, which
    consumers recognise. The first failure stops the replay (the log away: the next replay tries
    again, in order), but for an event the log refuses for its own bytes, which no replay would get
    onto it: that one is set aside for a person (docs/aws-durability.md) and the rest go on."""
    replayed = 0
    # asked before a page is listed too: a listing on S3 reads its objects
    while going_on() and (spilled := spill.list(limit=batch)):
        for n, item in enumerate(spilled):
            if n and not going_on():
                return replayed
            try:
                log.publish(item.topic, [marked_replayed(item.record, f"spill:{item.spill_id}")])
            except ValueRefused as refused:
                if spill.set_aside(item.spill_id):  # else another replay did, and said so
                    logger.error("the log refuses a spilled event; set aside", extra={
                        "spillId": item.spill_id, "topic": item.topic, "reason": str(refused)})
                    emit(SPILLS_SET_ASIDE, 1, topic=item.topic)
                continue
            spill.delete(item.spill_id)
            replayed += 1
    return replayed


def retention_days(topic: str, data_days: int, log_days: int) -> int:
    """How long a topic keeps its records: dead letters as long as the data (they wait for someone
    to read and replay them), the rest as long as the log."""
    return data_days if topic == DEADLETTER else log_days


REPLAY_GROUP = "blackbox-replay"
# librdkafka's consumer needs a group even to read one assigned partition (EventLog.read): this one
# is never joined nor committed to, and carries the deployment's prefix, as its grant on MSK does
READ_GROUP = "blackbox-read"
JOIN_TIMEOUT_S = 10.0
# a replay ends once the dead letters it found are published and none more come for this long
IDLE_TIMEOUT_S = 2.0


def replay_dead_letters(
    log: EventLog, poll_timeout_s: float = IDLE_TIMEOUT_S, join_timeout_s: float = JOIN_TIMEOUT_S, batch: int = 500,
    waiting: Callable[[float], None] = lambda _seconds: None,
) -> Counter[str]:
    """Publishes each dead letter to the topic it came from, for when what rejected it is fixed;
    returns how many went to each topic. Progress is committed by the replay's consumer group, so
    each dead letter is replayed once; those dead-lettered again while it runs (still bad) wait for
    the next replay instead of going round in circles.

    What "before the replay started" means is cut by offset, not by time: a record's timestamp has
    only milliseconds (one dead-lettered in the millisecond the replay starts would wait for the
    next replay) and on Kafka it is another host's clock. Every record below a partition's end
    offset taken here was there when the replay started; every record taken is below any left,
    so committing what is taken never skips one that waits. `waiting` is told before each poll how
    long it may wait (a countdown for whoever watches)."""
    ends = log.end_offsets(DEADLETTER)
    committed = log.committed(REPLAY_GROUP, DEADLETTER)
    # the partitions not yet read up to their ends: it stops once there are none, however many
    # records come after them (a consumer setting one aside every second would keep it polling)
    behind = {partition for partition, end in ends.items() if committed.get(partition, 0) < end}
    replayed: Counter[str] = Counter()
    if not behind:
        return replayed
    consumer = log.consumer(REPLAY_GROUP, DEADLETTER)
    try:
        # the first poll also waits for the group to be joined and partitions assigned
        wait_s = join_timeout_s
        while behind:
            waiting(wait_s)
            if not (polled := consumer.poll(batch, 16 << 20, wait_s)):
                break
            wait_s = poll_timeout_s
            behind -= {r.partition for r in polled if r.offset + 1 >= ends.get(r.partition, 0)}
            records = [r for r in polled if r.offset < ends.get(r.partition, 0)]
            by_topic: dict[str, list[OutgoingRecord]] = defaultdict(list)
            for record in records:
                source = dict(record.headers).get("sourceTopic", b"").decode("utf-8", "replace")
                if source not in CONSUMED:
                    # not ours to send anywhere (published there by hand?): it stays where it is,
                    # and the replay goes on past it rather than stall on it every time
                    logger.warning("a dead letter names no source topic; left in place",
                                   extra={"partition": record.partition, "offset": record.offset})
                    continue
                outgoing = OutgoingRecord(record.value, record.key, record.headers)
                by_topic[source].append(marked_replayed(outgoing, f"deadletter:{record.partition}:{record.offset}"))
            for topic, outgoing_records in by_topic.items():
                log.publish(topic, outgoing_records)
                replayed[topic] += len(outgoing_records)
            consumer.commit(records)
    finally:
        consumer.close()
    return replayed
