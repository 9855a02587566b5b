"""The consumers' failure rule (rule 8 of docs/architecture.md): a record either lands or goes to the dead-letter
topic with its reason, and a consumer never stalls on one record. A failure that a value caused
(an engine refused it, a constraint, a decode error) is isolated by splitting the batch until the
record is alone; anything else (an engine away, a timeout, a deadlock, what we cannot tell) is
raised, so the whole batch is retried with backoff: an outage must not dead-letter good records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import ValidationError

from pipeline.msk import correlation_ids
from pipeline.topics import Refused, dead_letter
from ports import EventLog, LogRecord
from ports.errors import ValueRefused
from ports.telemetry import logger

MAX_REASON_CHARS = 500
# the requests named on a retry's log line: enough to find them, not a batch's worth at every retry
MAX_LOGGED_IDS = 50


def caused_by_value(error: BaseException) -> bool:
    """True when retrying the same records can only fail again the same way: a record that does not
    parse or validate, or a value an engine refused (the adapters raise ValueRefused, a ValueError)."""
    return isinstance(error, ValidationError | ValueError | OverflowError)


def reason(error: BaseException) -> str:
    """One line: the error's kind and the first line of its message (a refusal's message alone)."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    if isinstance(error, Refused | ValueRefused):  # their messages say what was refused
        return first[:MAX_REASON_CHARS]
    return (f"{type(error).__name__}: {first}" if first else type(error).__name__)[:MAX_REASON_CHARS]


R = TypeVar("R")


def land_per_partition(records: Sequence[LogRecord], apply: Callable[[Sequence[LogRecord]], R], log: EventLog,
                       passed_over: Callable[[LogRecord], object]) -> list[R]:
    """`land` for each partition's records apart: for a consumer that writes a partition a
    transaction (with its offset), so that what one partition wrote is never tried again, nor
    miscounted, because of a record of another."""
    by_partition: dict[tuple[str, int], list[LogRecord]] = defaultdict(list)
    for record in records:
        by_partition[record.topic, record.partition].append(record)
    return [result for part in by_partition.values() for result in land(part, apply, log, passed_over)]


def land(records: Sequence[LogRecord], apply: Callable[[Sequence[LogRecord]], R], log: EventLog,
         passed_over: Callable[[LogRecord], object] | None = None) -> list[R]:
    """`apply` on the whole batch, or, when a value makes it fail, on halves, in log order, until
    the failing records are alone; those go to the dead-letter topic, then to `passed_over` (a
    consumer that stores offsets records that it is past them, so a redelivery does not send them
    again). `apply` must be idempotent for what it already wrote (offsets and keys make every
    consumer so), as a half may repeat work of a failed larger part. Returns the results of the
    parts that landed."""
    results: list[R] = []
    pending = [list(records)]
    while pending:
        part = pending.pop()
        try:
            results.append(apply(part))
        except Exception as error:
            if not caused_by_value(error):
                logger.warning("batch not landed; it is tried again whole", extra={
                    "reason": reason(error), "records": len(part),
                    "correlationIds": correlation_ids(part)[:MAX_LOGGED_IDS]})
                raise
            if len(part) == 1:
                dead_letter(log, [(part[0], reason(error))])
                if passed_over is not None:
                    passed_over(part[0])
            else:
                middle = len(part) // 2
                pending += [part[middle:], part[:middle]]  # the first half is popped first
    return results
