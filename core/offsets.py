"""Effectively-once consumption (DESIGN §3.4): a batch split by partition, without the records
at or below each partition's last applied offset (a redelivery, in whole or in part)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from adapters.ports import LogRecord


@dataclass(frozen=True)
class Fresh:
    topic_partition: str
    applied: int
    """The offset stored with the data: what the write must find still there."""
    records: list[LogRecord]

    @property
    def last(self) -> int:
        return self.records[-1].offset


def fresh_by_partition(records: Sequence[LogRecord], applied_offset: Callable[[str], int]) -> Iterator[Fresh]:
    by_partition: dict[str, list[LogRecord]] = defaultdict(list)
    for record in records:
        by_partition[f"{record.topic}-{record.partition}"].append(record)
    for topic_partition, batch in by_partition.items():
        applied = applied_offset(topic_partition)
        fresh = sorted((r for r in batch if r.offset > applied), key=lambda r: r.offset)
        if fresh:
            yield Fresh(topic_partition, applied, fresh)
