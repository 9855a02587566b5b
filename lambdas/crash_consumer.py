"""Crash consumer: MSK batch from `crashes` → documents, then index rows, announcing the crash
spikes those rows start as soon as they are written."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from crashes.persistence import persist_crashes
from crashes.spikes import announced
from pipeline.collector import collect_for_batches
from pipeline.msk import from_msk_event
from ports import IndexEntry
from ports.telemetry import CRASH_SPIKE, VISIBILITY_LATENCY, emit, instrumented, logger
from ports.timeutil import now_ms

collect_for_batches()


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    records = from_msk_event(event, a.settings.kafka_topic_prefix)

    def announce(indexed: list[IndexEntry]) -> None:
        try:
            # each as it is claimed: a failure at the next leaves none claimed and untold
            for spike in announced(a.index, a.issues, a.settings.spikes, indexed, now_ms()):
                logger.warning("crash spike", extra={"alert": spike.body()})
                emit(CRASH_SPIKE, 1, sku=spike.sku)
        except Exception:
            # the rows are written: delivered again, the batch would have nothing new to tell; a
            # later batch of the minute claims what this one did not
            logger.exception("crash spikes not checked", extra={"skus": sorted({e.sku for e in indexed})[:10]})

    persisted = persist_crashes(records, a.documents, a.index, a.log, a.documents_ttl_seconds, issues=a.issues,
                                groupings=a.groupings, on_indexed=announce)
    if persisted:
        # receive to queryable, for the oldest report of the batch
        emit(VISIBILITY_LATENCY, now_ms() - min(e.received_at for e in persisted), MetricUnit.Milliseconds)
    return {"persisted": len(persisted)}
