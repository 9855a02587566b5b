"""The webhooks' delivery, on a schedule (AWS; under `blackbox serve`, periodic threads run the
same): POSTs the due deliveries of the outbox and stores each outcome, raises the alerts of the
leaderboards' seasons that ended and of the velocity and crash-free drops (crashes.alerts), then
POSTs those."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from crashes.alerts import tell_alerts
from ports.telemetry import instrumented
from ports.timeutil import now_ms
from ranking.season_ends import tell_season_ends
from ranking.tree import DEFAULT_TREE
from webhooks.delivery import deliver_due


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    a = current()
    policy = a.settings.webhooks
    # the outbox first: a teller that fails, or runs until the function ends (a window of thousands
    # of skus), holds back no delivery; it claims none past half the run, which slow receivers
    # would take whole, so that the tellers run too; then what they raised, while a delivery's
    # timeout is left
    half = context.get_remaining_time_in_millis() / 2
    delivered = deliver_due(a.issues, policy, stopping=lambda: context.get_remaining_time_in_millis() < half)
    try:
        told = tell_season_ends(a.ranking, a.issues, DEFAULT_TREE, a.settings.season_end, now_ms())
        alerts = tell_alerts(a.counters, a.issues, a.settings.alerts, now_ms())
    finally:
        last = (policy.timeout_s + 1) * 1000
        delivered += deliver_due(a.issues, policy, stopping=lambda: context.get_remaining_time_in_millis() < last)
    return {"seasonEnds": told, "alerts": alerts, "delivered": delivered}
