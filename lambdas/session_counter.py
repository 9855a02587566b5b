"""Session counter: MSK batch from `sessions` → per-sku-minute counters, effectively once."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from pipeline.collector import collect_for_batches
from pipeline.msk import from_msk_event
from ports.telemetry import instrumented
from sessions.counting import count_sessions

collect_for_batches()


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    return {"counted": count_sessions(from_msk_event(event, a.settings.kafka_topic_prefix), a.counters, a.log)}
