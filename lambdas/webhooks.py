"""The webhooks' delivery, on a schedule (AWS; under `blackbox serve`, a periodic thread runs the
same): POSTs the due deliveries of the outbox and stores each outcome."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from ports.telemetry import instrumented
from webhooks.delivery import deliver_due


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    a = current()
    return {"delivered": deliver_due(a.issues, a.settings.webhooks)}
