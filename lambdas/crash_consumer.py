"""Crash consumer: MSK batch from `crashes` → documents, then index rows."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from core.api import logger
from core.msk import from_msk_event
from crashes.persistence import persist_crashes


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    persisted = persist_crashes(from_msk_event(event), a.documents, a.index, a.log, a.retention_seconds)
    return {"persisted": persisted}
