"""Retention (rule 6 of docs/architecture.md): crash reports, counters, alerts and spill are kept
`retention_days` (90 by default), the event log, a buffer, `log_retention_days` (its dead letters as long as the data).
The purge job deletes what is older from every store. A leaderboard's seasons are kept as its
settings say (`keep_seasons` past ones, or all)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pipeline.topics import CONSUMED, DEADLETTER
from ports import CrashIndex, DocumentStore, EventLog, RankingStore, SessionCounters, SpillStore
from ports.issues import IssueStore
from ports.telemetry import logger
from ranking.seasons import purge_seasons

DAY_MS = 86_400_000


class Retention(Protocol):
    @property
    def retention_days(self) -> int: ...

    @property
    def log_retention_days(self) -> int: ...


class Retained(Protocol):
    """What the purge reaches: a process's adapters (adapters.factory.Adapters), named by what it
    uses so that retention depends on the ports alone, not on how they are built."""

    @property
    def settings(self) -> Retention: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def spill(self) -> SpillStore: ...

    @property
    def documents(self) -> DocumentStore: ...

    @property
    def index(self) -> CrashIndex: ...

    @property
    def counters(self) -> SessionCounters: ...

    @property
    def ranking(self) -> RankingStore: ...

    @property
    def issues(self) -> IssueStore: ...


@dataclass(frozen=True)
class Purged:
    log_records: int
    spilled: int
    documents: int
    reports: int
    counter_rows: int
    season_rows: int
    alert_rows: int


def purge(adapters: Retained, now_ms: int, *, include_log: bool = True,
          readers: Mapping[str, str] | None = None) -> Purged:
    """`include_log` False leaves the log to its own retention (MSK topics' retention.ms); of the
    topics, what their `readers` (topic → consumer group) have not committed is kept."""
    settings = adapters.settings
    before = now_ms - settings.retention_days * DAY_MS
    # the dead letters wait as long as the data, for someone to read and replay them
    purged = Purged(
        log_records=(adapters.log.purge(CONSUMED, now_ms - settings.log_retention_days * DAY_MS, readers)
                     + adapters.log.purge([DEADLETTER], before) if include_log else 0),
        spilled=adapters.spill.purge(before),
        documents=adapters.documents.purge_expired(),
        reports=adapters.index.purge(before),
        counter_rows=adapters.counters.purge(before),
        season_rows=purge_seasons(adapters.ranking, now_ms),
        alert_rows=adapters.issues.purge(before),  # the alerts and their deliveries: the webhooks' outbox
    )
    logger.info("purged what is past retention", extra={"purged": purged.__dict__, "before": before})
    return purged

