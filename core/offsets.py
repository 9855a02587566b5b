"""Effectively-once consumption (DESIGN §3.4). A batch is split by partition, without the records
at or below each partition's last applied offset (a redelivery, in whole or in part), and without
the events whose eventId was applied already (a client retry with the same Idempotency-Key). Offsets
and those eventIds are written with the data, in one transaction. Records `blackbox replay` published
again carry the REPLAYED header: a replay cut off midway repeats them, so their eventIds are
checked and stored whatever their kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, TypeVar

from adapters.ports import Checkpoint, Checkpoints, LogRecord


class _Event(Protocol):
    @property
    def eventId(self) -> str: ...


E = TypeVar("E", bound=_Event)

REPLAYED = "replayed"


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
                          tuple(e.eventId for e in events if self._keyed(e.eventId)))

    def unseen(self, store: Checkpoints, consumer: str, events: Sequence[E]) -> list[E]:
        """The events not applied before, nor earlier in this batch, in order."""
        keyed = {e.eventId for e in events if self._keyed(e.eventId)}
        if not keyed:
            return list(events)
        seen = store.seen_events(consumer, sorted(keyed))
        fresh = []
        for event in events:
            if event.eventId not in seen:
                if event.eventId in keyed:
                    seen.add(event.eventId)
                fresh.append(event)
        return fresh


def fresh_by_partition(records: Sequence[LogRecord], applied_offset: Callable[[str], int]) -> Iterator[Fresh]:
    by_partition: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_partition[f"{record.topic}-{record.partition}"].append(record)
    for topic_partition, batch in by_partition.items():
        applied = applied_offset(topic_partition)
        fresh = sorted((r for r in batch if r.offset > applied), key=lambda r: r.offset)
        if fresh:
            yield Fresh(topic_partition, applied, fresh)


def retriable(event_id: str) -> bool:
    """Only eventIds derived from an Idempotency-Key (uuid5) can come twice from a client; random
    ones (uuid4) never do, so they are neither looked up nor stored: keyless traffic pays nothing.
    Capture writes canonical UUID strings, whose 15th character is the version (read, not parsed:
    this runs for every event on the worker's hot path)."""
    return len(event_id) == 36 and event_id[8] == event_id[13] == "-" and event_id[14] == "5"

