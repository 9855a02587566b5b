"""Minidump processor: MSK batch from `minidumps` → each report's minidump walked with the symbols
held, its walk stored and its index row updated (crashes.processing)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from adapters.stackwalk import Stackwalker
from crashes.processing import Processor
from pipeline.collector import collect_for_batches
from pipeline.msk import from_msk_event
from ports.minidumps import Walked, WalkFailed
from ports.telemetry import MINIDUMPS_FAILED, MINIDUMPS_PROCESSED, emit, instrumented

collect_for_batches()


@functools.cache
def _walker() -> Stackwalker:
    # not found (as WalkerBroken, when it cannot run): the batch fails and is retried, and nothing is
    # marked failed for a deployment's fault
    return Stackwalker.installed()


class _Installed:
    """The installed walker, looked for at the first walk: a batch of regroupings and symbol
    arrivals alone walks nothing, and a serve without the walker (no cargo) still merges and
    reprocesses reports that have no minidump."""

    def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
        return _walker().walk(minidump, symbols)


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    a = current()
    processor = Processor(documents=a.documents, index=a.index, symbols=a.symbols, walker=_Installed(), log=a.log,
                          issues=a.issues, ttl_seconds=a.documents_ttl_seconds,
                          time_left_s=lambda: context.get_remaining_time_in_millis() / 1000)
    results = processor.process(from_msk_event(event, a.settings.kafka_topic_prefix))
    for metric, state in ((MINIDUMPS_PROCESSED, "processed"), (MINIDUMPS_FAILED, "failed")):
        if count := sum(result.state == state for result in results):
            emit(metric, count)
    return {"processed": len(results)}
