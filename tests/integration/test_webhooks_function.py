"""The scheduled webhooks function (lambdas/webhooks.py): the outbox's due deliveries are sent
whatever its tellers of seasons' ends and alerts do."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.factory import Adapters
from lambdas import webhooks
from local_runtime.context import LocalContext
from tests.conftest import load_event


def test_a_teller_that_fails_holds_back_no_delivery(adapters: Adapters, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: sessions of thousands of made-up skus from one ingest key made the alerts'
    run long enough to end the function (55 s) before the deliveries that came after it, in every
    run while they lasted: no webhook was sent, a season's end's or a crash group's."""
    runs: list[str] = []

    def deliver(*_: Any) -> int:
        runs.append("delivered")
        return 1

    def failing(*_: Any) -> int:
        runs.append("alerts")
        raise RuntimeError("the alerts' run failed")

    monkeypatch.setattr(webhooks, "deliver_due", deliver)
    monkeypatch.setattr(webhooks, "tell_alerts", failing)
    with pytest.raises(RuntimeError, match="the alerts' run failed"):
        webhooks.handler(load_event("webhooks-scheduled.json"), LocalContext("webhooks"))
    assert runs == ["delivered", "alerts", "delivered"]
