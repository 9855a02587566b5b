"""Ranking worker: MSK batch from `scores` → scores, tree node deltas and offset, one transaction."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from pipeline.collector import collect_for_batches
from pipeline.msk import from_msk_event
from ports.telemetry import instrumented
from ranking.tree import DEFAULT_TREE
from ranking.worker import apply_scores

collect_for_batches()


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    records = from_msk_event(event, a.settings.kafka_topic_prefix)
    return {"applied": apply_scores(records, a.ranking, a.log, DEFAULT_TREE)}
