"""Effectively-once consumption (rule 4 of docs/architecture.md). A batch is split by partition, without the records
at or below each partition's last applied offset (a redelivery, in whole or in part), and without
the events whose eventId was applied already (a client retry with the same Idempotency-Key). Offsets
and those eventIds, with the hash of what each carried, are written with the data, in one
transaction; an eventId that comes again with another body is a reused key (rule 9 of docs/architecture.md) and is
dead-lettered, never applied. Records `blackbox replay` published again carry the REPLAYED header:
a replay cut off midway repeats them, so their eventIds are checked and stored whatever their kind.

A batch an event source mapping gave up on (AWS; pipeline.replay) may have landed in part: each
partition lands in its own transaction, and a partition's first half may land before the rest
fails. Those records' eventIds were stored only if they had a key, and the partition's offset, once
later batches moved it past the batch, cannot tell them from the records that never landed. So each
transaction also stores the offsets it covered (first..last of the records it applied or passed
over), and a record replayed from a failed batch is skipped when a stored range holds the offset it
was replayed from, and otherwise applied, with its eventId stored, so a repeated replay stays once.

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
# the REPLAYED origin of a record from a failed batch, followed by "{topic}-{partition}:{offset}"
FAILED_BATCH = "failed-batch:"


def failed_batch_origin(record: LogRecord) -> str:
    """The REPLAYED header's value for a record of a failed batch: where it was first on the log. A
    copy replayed from a failed batch before keeps its first place: that is where a stored range
    may cover it (the copies that landed stored their eventIds)."""
    topic_partition, offset = _replayed_from(record) or (f"{record.topic}-{record.partition}", record.offset)
    return f"{FAILED_BATCH}{topic_partition}:{offset}"


def _replayed_from(record: LogRecord) -> tuple[str, int] | None:
    """The partition and offset a record replayed from a failed batch had (None for any other)."""
    origin = dict(record.headers).get(REPLAYED, b"").decode()
    if not origin.startswith(FAILED_BATCH):
        return None
    topic_partition, _, offset = origin.removeprefix(FAILED_BATCH).rpartition(":")
    return topic_partition, int(offset)


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
                          fingerprint(self.records[-1]), self.records[0].offset)

    def _landed_before(self, store: Checkpoints, consumer: str) -> set[tuple[str, int]]:
        """The origins of the records replayed from failed batches that a stored range covers."""
        origins: dict[str, list[int]] = defaultdict(list)
        for record in self.records if self.replayed else ():
            if (origin := _replayed_from(record)) is not None:
                origins[origin[0]].append(origin[1])
        return {(tp, offset) for tp, offsets in origins.items() for offset in store.covered(consumer, tp, offsets)}

    def unseen(self, store: Checkpoints, consumer: str, events: Sequence[E]) -> list[E]:
        """The events (of `records`, one each, in order) not applied before, nor earlier in this
        batch, in order; Refused for one that reuses a key with another body."""
        landed = self._landed_before(store, consumer)
        keyed = {e.eventId for e in events if self._keyed(e.eventId)}
        seen = store.seen_events(consumer, sorted(keyed)) if keyed else {}
        fresh = []
        for record, event in zip(self.records, events, strict=True):
            if landed and _replayed_from(record) in landed:
                continue
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
                   f"log was reset on purpose, delete the rows ({consumer}, {topic_partition}) of applied_offsets "
                   "and applied_ranges")
        logger.error(message)
        raise ForeignOffset(message)


def pass_over(record: LogRecord, store: Checkpoints, consumer: str, log: EventLog,
              record_checkpoint: Callable[[Checkpoint], object]) -> None:
    """Moves the partition's stored offset past a record that was set aside (dead-lettered),
    through `record_checkpoint` (the store's write of a checkpoint with no data)."""
    for part in fresh_by_partition([record], store, consumer, log):
        record_checkpoint(part.checkpoint(consumer, []))
