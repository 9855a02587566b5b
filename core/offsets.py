"""Effectively-once consumption (DESIGN §3.4). A batch is split by partition, without the records
at or below each partition's last applied offset (a redelivery, in whole or in part), and without
the events whose eventId was applied already (a client retry with the same Idempotency-Key). Offsets
and those eventIds, with the hash of what each carried, are written with the data, in one
transaction; an eventId that comes again with another body is a reused key (DESIGN §3.9) and is
dead-lettered, never applied. Records `blackbox replay` published again carry the REPLAYED header:
a replay cut off midway repeats them, so their eventIds are checked and stored whatever their kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Generic, Protocol, TypeVar

from adapters.ports import Checkpoint, Checkpoints, LogRecord
from core.idempotency import conflicts, retriable


class _Event(Protocol):
    @property
    def eventId(self) -> str: ...

    @property
    def bodyHash(self) -> str | None: ...


E = TypeVar("E", bound=_Event)

REPLAYED = "replayed"
IDEMPOTENCY_CONFLICT = "idempotency_conflict"


@dataclass(frozen=True)
class Unseen(Generic[E]):
    fresh: list[E]
    """The events to apply, in order."""
    conflicting: list[tuple[LogRecord, str]]
    """Records whose key was used before for another body, with the reason, for the dead letters."""


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
                          {e.eventId: e.bodyHash for e in events if self._keyed(e.eventId)})

    def unseen(self, store: Checkpoints, consumer: str, parsed: Sequence[tuple[LogRecord, E]]) -> Unseen[E]:
        """The events not applied before, nor earlier in this batch, and those that reuse a key."""
        keyed = {e.eventId for _, e in parsed if self._keyed(e.eventId)}
        seen = store.seen_events(consumer, sorted(keyed)) if keyed else {}
        result: Unseen[E] = Unseen([], [])
        for record, event in parsed:
            if event.eventId not in seen:
                if event.eventId in keyed:
                    seen[event.eventId] = event.bodyHash
                result.fresh.append(event)
            elif conflicts(seen[event.eventId], event.bodyHash):
                result.conflicting.append((record, f"{IDEMPOTENCY_CONFLICT}: eventId {event.eventId} was "
                                                   "accepted before with another body; the first is kept"))
        return result


def fresh_by_partition(records: Sequence[LogRecord], applied_offset: Callable[[str], int]) -> Iterator[Fresh]:
    by_partition: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_partition[f"{record.topic}-{record.partition}"].append(record)
    for topic_partition, batch in by_partition.items():
        applied = applied_offset(topic_partition)
        fresh = sorted((r for r in batch if r.offset > applied), key=lambda r: r.offset)
        if fresh:
            yield Fresh(topic_partition, applied, fresh)
