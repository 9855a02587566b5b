"""Topic names and the dead-letter rule (DESIGN §3.5: nothing is dropped silently)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.ports import EventLog, LogRecord, OutgoingRecord
from core.errors import Unavailable

CRASHES = "crashes"
SESSIONS = "sessions"
SCORES = "scores"
DEADLETTER = "deadletter"


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


def publish(log: EventLog, topic: str, record: OutgoingRecord) -> None:
    """Capture's write: durable, or a 503 the client may retry (nothing was promised)."""
    try:
        log.publish(topic, [record])
    except Exception as exc:
        raise Unavailable(f"the event log did not take the event: {type(exc).__name__}") from exc
