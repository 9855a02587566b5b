"""Topic names and the dead-letter rule (DESIGN §3.5: nothing is dropped silently)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import ValidationError

from adapters.ports import EventLog, LogRecord, OutgoingRecord, SpillStore
from core.api import logger
from core.errors import Unavailable
from core.metrics import DEAD_LETTERS, emit

CRASHES = "crashes"
SESSIONS = "sessions"
SCORES = "scores"
DEADLETTER = "deadletter"
ALL_TOPICS = (CRASHES, SESSIONS, SCORES, DEADLETTER)


def dead_letter(log: EventLog, rejected: Sequence[tuple[LogRecord, str]]) -> None:
    """Moves malformed records aside with the reason and where they came from, so a replay can
    find them and a duplicate (after a retried batch) can be recognised by its source."""
    if not rejected:
        return
    log.publish(
        DEADLETTER,
        [
            OutgoingRecord(
                value=record.value,
                key=record.key,
                headers=(
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


def parse_or_dead_letter(
    log: EventLog, records: Sequence[LogRecord], parse: Callable[[bytes], T], what: str
) -> list[T]:
    """Each record's value parsed, in order; those that do not parse go to the dead-letter topic."""
    parsed: list[T] = []
    rejected: list[tuple[LogRecord, str]] = []
    for record in records:
        try:
            parsed.append(parse(record.value))
        except ValidationError as exc:
            rejected.append((record, f"malformed {what} record: {exc.errors()[0]['msg']}"))
    dead_letter(log, rejected)
    return parsed


def publish(log: EventLog, spill: SpillStore, topic: str, records: Sequence[OutgoingRecord]) -> None:
    """Capture's write: durable on the log, or else in the spill store until `blackbox replay`
    (DESIGN §1); only when both fail a 503 the client may retry, as nothing was promised."""
    try:
        log.publish(topic, records)
        return
    except Exception as log_error:
        logger.warning("event log did not take the event; spilling it", extra={"error": repr(log_error)})
        try:
            for record in records:
                spill.put(topic, record)
        except Exception as spill_error:
            raise Unavailable(f"neither the event log nor the spill store took the event: {spill_error!r}") from None


def replay_spilled(log: EventLog, spill: SpillStore, batch: int = 100) -> int:
    """Publishes spilled events again, oldest first; each leaves the spill store once it is on the
    log, so a crash midway repeats at most one event (consumers are idempotent by key)."""
    replayed = 0
    while spilled := spill.list(limit=batch):
        for item in spilled:
            log.publish(item.topic, [item.record])
            spill.delete(item.spill_id)
            replayed += 1
    return replayed
