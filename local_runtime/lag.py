"""How far each consumer function is behind its topic: the records published that its consumer
group has not committed, and how long the oldest of them has waited. Serve's consumers commit a
batch once its handler returned (local_runtime.poller), so this is what is not yet applied, or
applied and about to be committed; in AWS the functions' event source mappings keep their own
groups, and CloudWatch's `OffsetLag` tells the same (docs/aws-durability.md)."""

from __future__ import annotations

from dataclasses import dataclass

from lambdas.functions import CONSUMERS
from local_runtime.poller import consumer_group
from ports import EventLog


@dataclass(frozen=True)
class Lag:
    function: str
    topic: str
    behind: int
    """Records published and not committed by the function's group."""
    oldest_ms: int | None
    """When the oldest of them was published (None when none is behind, or the log holds it no more)."""
    partitions: int
    """The topic's partitions on the log (on Kafka 0 when no topic is so named; on SQLite those
    that hold a record)."""


def lags(log: EventLog) -> list[Lag]:
    found = []
    for function, topic in CONSUMERS.items():
        committed, starts, ends = (log.committed(consumer_group(function), topic), log.start_offsets(topic),
                                   log.end_offsets(topic))
        # from the first record the log still holds where the group is further back (or never
        # committed): what went before it is no longer there to wait
        waiting = {p: (next_offset, end) for p, end in ends.items()
                   if end > (next_offset := max(committed.get(p, 0), starts.get(p, 0)))}
        oldest = [record.timestamp_ms for p, (next_offset, _) in waiting.items()
                  if (record := log.read(topic, p, next_offset)) is not None]
        found.append(Lag(function, topic, sum(end - next_offset for next_offset, end in waiting.values()),
                         min(oldest, default=None), len(ends)))
    return found
