"""Retention (DESIGN §3.6): crash reports, counters and spill are kept `retention_days` (90 by
default), the event log, a buffer, `log_retention_days`. The purge job deletes what is older from
every store; leaderboards are current standings, not history, and are kept."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.factory import Adapters
from core.api import logger
from core.topics import ALL_TOPICS

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Purged:
    log_records: int
    spilled: int
    documents: int
    reports: int
    counter_rows: int


def purge(adapters: Adapters, now_ms: int, *, include_log: bool = True) -> Purged:
    """`include_log` False leaves the log to its own retention (MSK topics' retention.ms)."""
    settings = adapters.settings
    before = now_ms - settings.retention_days * DAY_MS
    purged = Purged(
        log_records=(adapters.log.purge(ALL_TOPICS, now_ms - settings.log_retention_days * DAY_MS)
                     if include_log else 0),
        spilled=adapters.spill.purge(before),
        documents=adapters.documents.purge_expired(),
        reports=adapters.index.purge(before),
        counter_rows=adapters.counters.purge(before),
    )
    logger.info("purged what is past retention", extra={"purged": purged.__dict__, "before": before})
    return purged
