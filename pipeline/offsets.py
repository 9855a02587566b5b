"""Effectively-once consumption (DESIGN §3.4). A batch is split by partition, without the records
at or below each partition's last applied offset (a redelivery, in whole or in part), and without
the events whose eventId was applied already (a client retry with the same Idempotency-Key). Offsets
and those eventIds, with the hash of what each carried, are written with the data, in one
transaction; an eventId that comes again with another body is a reused key (DESIGN §3.9) and is
dead-lettered, never applied. Records `blackbox replay` published again carry the REPLAYED header:
a replay cut off midway repeats them, so their eventIds are checked and stored whatever their kind.

A stored offset is trusted only for the log it came from: with it is stored the fingerprint of its
record, and before records at or below it are skipped, the log's record at that offset must match.
An offset from another log (a sample event run against live state, a topic recreated, a data
directory reset) would otherwise skip every real event below it without a word; instead the
consumer stops, loudly, until someone decides."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, TypeVar

from pipeline.idempotency import conflicts, retriable
from pipeline.topics import REPLAYED, Refused
from ports import Applied, Checkpoint, Checkpoints, EventLog, LogRecord
from ports.telemetry import FOREIGN_OFFSET, emit, logger


class _Event(Protocol):
    @property
    def eventId(self) -> str: ...

    @property
    def bodyHash(self) -> str | None: ...


E = TypeVar("E", bound=_Event)

IDEMPOTENCY_CONFLICT = "idempotency_conflict"


@dataclass(frozen=True)
class Fresh:
    topic_partition: str
    applied: int
    """The offset stored with the data: what the write must find still there."""
    records: list[LogRecord]

    @cached_property
    def replayed(self) -> bool:
        return any(name == REPLAYED for record in self.records for name, _ in record.headers)

    def _keyed(self, event_id: str) -> bool:
        return self.replayed or retriable(event_id)

    def checkpoint(self, consumer: str, events: Sequence[_Event]) -> Checkpoint:
        return Checkpoint(consumer, self.topic_partition, self.applied, self.records[-1].offset,
                          {e.eventId: e.bodyHash for e in events if self._keyed(e.eventId)},
                          fingerprint(self.records[-1]))

    def unseen(self, store: Checkpoints, consumer: str, events: Sequence[E]) -> list[E]:
        """The events not applied before, nor earlier in this batch, in order; Refused for one that
        reuses a key with another body."""
        keyed = {e.eventId for e in events if self._keyed(e.eventId)}
        seen = store.seen_events(consumer, sorted(keyed)) if keyed else {}
        fresh = []
        for event in events:
            if event.eventId not in seen:
                if event.eventId in keyed:
                    seen[event.eventId] = event.bodyHash
                fresh.append(event)
            elif conflicts(seen[event.eventId], event.bodyHash):
                raise Refused(f"{IDEMPOTENCY_CONFLICT}: eventId {event.eventId} was accepted before with another "
                              "body; the first is kept")
        return fresh


class ForeignOffset(Exception):
    """A stored offset whose record the log does not hold: it belongs to another log."""


def fingerprint(record: LogRecord) -> str:
    digest = hashlib.blake2b(record.value, digest_size=8)
    digest.update(record.timestamp_ms.to_bytes(8, "big", signed=True))
    return digest.hexdigest()


def fresh_by_partition(records: Sequence[LogRecord], store: Checkpoints, consumer: str, log: EventLog
                       ) -> Iterator[Fresh]:
    by_partition: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_partition[f"{record.topic}-{record.partition}"].append(record)
    for topic_partition, batch in by_partition.items():
        stored = store.applied(consumer, topic_partition)
        if any(r.offset <= stored.offset for r in batch):  # a redelivery, or an offset from elsewhere
            _check(stored, batch, consumer, topic_partition, log)
        fresh = sorted((r for r in batch if r.offset > stored.offset), key=lambda r: r.offset)
        if fresh:
            yield Fresh(topic_partition, stored.offset, fresh)


def _check(stored: Applied, batch: Sequence[LogRecord], consumer: str, topic_partition: str, log: EventLog) -> None:
    if stored.fingerprint is None:  # stored before fingerprints were
        return
    record = next((r for r in batch if r.offset == stored.offset), None)
    if record is None:
        record = log.read(batch[0].topic, batch[0].partition, stored.offset)
    if record is None or fingerprint(record) != stored.fingerprint:
        emit(FOREIGN_OFFSET, 1, consumer=consumer, topicPartition=topic_partition)
        message = (f"{consumer} {topic_partition}: the stored offset {stored.offset} is not one of this log's (its "
                   "record is gone or another), so nothing below it is skipped and the consumer waits. If the "
                   f"log was reset on purpose, delete the row ({consumer}, {topic_partition}) of applied_offsets")
        logger.error(message)
        raise ForeignOffset(message)


def pass_over(record: LogRecord, store: Checkpoints, consumer: str, log: EventLog,
              record_checkpoint: Callable[[Checkpoint], object]) -> None:
    """Moves the partition's stored offset past a record that was set aside (dead-lettered),
    through `record_checkpoint` (the store's write of a checkpoint with no data)."""
    for part in fresh_by_partition([record], store, consumer, log):
        record_checkpoint(part.checkpoint(consumer, []))
