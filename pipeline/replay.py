"""What the scheduled replay function runs in AWS (lambdas/replay.py): the spill, with the code
`blackbox replay` runs (pipeline.topics.replay_spilled), then the batches the MSK event source mappings
gave up on. Each record goes back to its topic marked `replayed` with where it was, so the consumers
skip it when it landed before the batch was given up (a transaction stores the offsets it covered),
and otherwise look its eventId up and apply it once however often it comes (pipeline.offsets).

A failed batch is the JSON object Lambda writes to an S3 on-failure destination once a mapping's
retries are spent (docs/aws-durability.md). Its format is documented under "S3 destination example
invocation record" in https://docs.aws.amazon.com/lambda/latest/dg/kafka-on-failure.html: the
metadata an SQS or SNS destination gets (requestContext with the condition; KafkaBatchInfo, whose
`recordsInfo` has the first and last offset of each "topic-partition") and, for S3 only, `payload`:
the whole invocation event, the MSK event the function was given, as an escaped JSON string. So the
records themselves are in the object, and are published from it. An object without its payload (the
documentation promises one: this is a guard) has its records read back from the log by offset,
which works as long as the topic's retention still holds them."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pipeline.msk import from_msk_event
from pipeline.offsets import failed_batch_origin
from pipeline.topics import CONSUMED, marked_replayed, replay_spilled
from ports import EventLog, LogRecord, OutgoingRecord, SpillStore
from ports.telemetry import FAILED_BATCHES, emit, logger


class FailedBatchStore(Protocol):
    def keys(self) -> list[str]: ...

    def read(self, key: str) -> bytes: ...

    def delete(self, key: str) -> None: ...


class Unreplayable(ValueError):
    """A failed batch that cannot be published again: it stays where it is for a person, and the
    FailedBatches alarm with it."""


@dataclass(frozen=True)
class Replayed:
    spilled: int
    failed_batches: int
    failed_records: int


def _topic(name: str, prefix: str) -> str:
    """The log's name of a topic as the cluster names it (prefixed by the deployment)."""
    topic = name.removeprefix(prefix)
    if not name.startswith(prefix) or topic not in CONSUMED:
        raise Unreplayable(f"topic {name!r} is not one a consumer reads")
    return topic


def failed_records(document: Mapping[str, Any], log: EventLog, topic_prefix: str) -> list[LogRecord]:
    """The records of a failed batch, under the log's topic names, in offset order per partition."""
    payload = document.get("payload")
    if payload:
        event = json.loads(payload) if isinstance(payload, str) else payload
        return [replace(record, topic=_topic(record.topic, topic_prefix)) for record in from_msk_event(event)]
    records = []
    for topic_partition, offsets in document["KafkaBatchInfo"]["recordsInfo"].items():
        name, partition = topic_partition.rsplit("-", 1)
        topic = _topic(name, topic_prefix)
        for offset in range(int(offsets["firstRecordOffset"]), int(offsets["lastRecordOffset"]) + 1):
            record = log.read(topic, int(partition), offset)
            if record is None:
                raise Unreplayable(f"{topic_partition} offset {offset} is no longer in the log (past its retention)")
            records.append(record)
    return records


def replay_failed_batches(log: EventLog, store: FailedBatchStore, topic_prefix: str,
                          going_on: Callable[[], bool] = lambda: True) -> tuple[int, int]:
    """Publishes every failed batch again, while `going_on` (asked before each), and deletes it once
    all its records are on the log (a run cut off in between publishes them once more, which the
    consumers recognise). Returns how many batches and records went back."""
    keys = store.keys()
    if keys:
        emit(FAILED_BATCHES, len(keys))
    batches = records = 0
    for key in keys:
        if not going_on():
            break
        try:
            found = failed_records(json.loads(store.read(key)), log, topic_prefix)
        except (ValueError, KeyError) as exc:  # Unreplayable, or not the documented format
            logger.error("a failed batch cannot be replayed; it stays in the bucket",
                         extra={"key": key, "reason": repr(exc)})
            continue
        by_topic: dict[str, list[OutgoingRecord]] = defaultdict(list)
        for r in found:
            by_topic[r.topic].append(marked_replayed(OutgoingRecord(r.value, r.key, r.headers), failed_batch_origin(r)))
        for topic, outgoing in by_topic.items():
            log.publish(topic, outgoing)
        store.delete(key)
        logger.info("replayed a failed batch", extra={"key": key, "records": len(found)})
        batches += 1
        records += len(found)
    return batches, records


def replay_held_back(log: EventLog, spill: SpillStore, failed: FailedBatchStore | None,
                     topic_prefix: str, remaining_s: Callable[[], float] | None = None) -> Replayed:
    """The spill, then the failed batches (None where no event source mapping runs: on one
    machine the poller never gives a batch up). With `remaining_s` (the seconds the run may still
    take), the spill takes half of them at most, and the failed batches the rest: a spill backlog
    that outlasts a run (a long outage's) holds them back no longer than it."""
    log.ping()  # while the log is away nothing can go back: fail before reading either store
    spill_on = batches_on = _always
    if remaining_s is not None:
        half = remaining_s() / 2
        spill_on, batches_on = (lambda: remaining_s() > half), (lambda: remaining_s() > 0)
    try:
        spilled = replay_spilled(log, spill, going_on=spill_on)
    except Exception:
        # a failure that stops the spill's replay (which keeps its order) holds back no failed
        # batch: those go back while the log answers
        log.ping()
        if failed is not None:
            replay_failed_batches(log, failed, topic_prefix, batches_on)
        raise
    batches, records = replay_failed_batches(log, failed, topic_prefix, batches_on) if failed is not None else (0, 0)
    return Replayed(spilled, batches, records)


def _always() -> bool:
    return True
