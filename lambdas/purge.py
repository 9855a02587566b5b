"""Purge: on a daily schedule, deletes what is past retention from every store."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from ports.telemetry import instrumented
from ports.timeutil import now_ms
from retention.purge import purge


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # MSK expires the topics' records by their retention.ms, set by the deployment
    return asdict(purge(current(), now_ms(), include_log=False))
