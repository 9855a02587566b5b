"""Replay: every few minutes in AWS (an EventBridge schedule), publishes again what capture spilled
and the batches the event source mappings gave up on."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from adapters.failed_batches import failed_batches
from pipeline.replay import replay_held_back
from ports.telemetry import instrumented

# what a run leaves of its time for the publish under way when it stops starting new ones
STOP_BEFORE_S = 20.0


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    return asdict(replay_held_back(a.log, a.spill, failed_batches(a.settings), a.settings.kafka_topic_prefix,
                                   lambda: context.get_remaining_time_in_millis() / 1000 - STOP_BEFORE_S))
