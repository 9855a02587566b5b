"""Crash consumer: MSK batch from `crashes` → documents, then index rows; then announces the
crash spikes this batch started."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from core.api import METRICS_NAMESPACE, logger
from core.msk import from_msk_event
from crashes.persistence import persist_crashes
from crashes.spikes import crossed


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    persisted = persist_crashes(from_msk_event(event), a.documents, a.index, a.log, a.retention_seconds)
    for spike in crossed(a.index, a.settings.spikes, persisted):
        logger.warning("crash spike", extra={"alert": spike.body()})
        # one series for every sku, so one alarm covers them all; the sku rides along as metadata
        with single_metric(name="CrashSpike", unit=MetricUnit.Count, value=1, namespace=METRICS_NAMESPACE) as metric:
            metric.add_metadata(key="sku", value=spike.sku)
    return {"persisted": len(persisted)}
