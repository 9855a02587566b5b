"""The scheduled webhooks function (lambdas/webhooks.py): the outbox's due deliveries are sent
whatever its tellers of seasons' ends and alerts do, and neither takes the whole run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.factory import Adapters
from lambdas import webhooks
from local_runtime.context import LocalContext
from tests.conftest import load_event


@dataclass
class Run:
    """What the function did, in order: each delivery pass with whether it was told to stop claiming
    (as it starts), and the tellers."""

    steps: list[str]

    def deliver(self, *_: Any, stopping: Callable[[], object]) -> int:
        self.steps.append(f"delivered (stopping: {bool(stopping())})")
        return 1


def test_a_teller_that_fails_holds_back_no_delivery(adapters: Adapters, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: sessions of thousands of made-up skus from one ingest key made the alerts'
    run long enough to end the function (55 s) before the deliveries that came after it, in every
    run while they lasted: no webhook was sent, a season's end's or a crash group's."""
    run = Run([])

    def failing(*_: Any) -> int:
        run.steps.append("alerts")
        raise RuntimeError("the alerts' run failed")

    monkeypatch.setattr(webhooks, "deliver_due", run.deliver)
    monkeypatch.setattr(webhooks, "tell_alerts", failing)
    with pytest.raises(RuntimeError, match="the alerts' run failed"):
        webhooks.handler(load_event("webhooks-scheduled.json"), LocalContext("webhooks"))
    assert run.steps == ["delivered (stopping: False)", "alerts", "delivered (stopping: False)"]


class Ending(LocalContext):
    """A run whose time goes as the function's steps go: 55 s, then 20 s left."""

    def __init__(self) -> None:
        super().__init__("webhooks")
        self.left = [55_000, 20_000]

    def get_remaining_time_in_millis(self) -> int:
        return self.left.pop(0) if len(self.left) > 1 else self.left[0]


def test_the_first_deliveries_leave_the_tellers_half_the_run(adapters: Adapters,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: receivers slow to answer, a thousand deliveries a run, would take the whole
    run before the tellers, and no season's end or alert would be raised while they lasted."""
    run = Run([])
    monkeypatch.setattr(webhooks, "deliver_due", run.deliver)
    monkeypatch.setattr(webhooks, "tell_alerts", lambda *_: run.steps.append("alerts") or 0)
    webhooks.handler(load_event("webhooks-scheduled.json"), Ending())
    assert run.steps == ["delivered (stopping: True)", "alerts", "delivered (stopping: False)"]
