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
    # the outbox first: a teller that fails, or runs until the function ends (a window of thousands
    # of skus), holds back no delivery; then what the tellers raised, in the same run
    delivered = deliver_due(a.issues, a.settings.webhooks)
    try:
        told = tell_season_ends(a.ranking, a.issues, DEFAULT_TREE, a.settings.season_end, now_ms())
        alerts = tell_alerts(a.counters, a.issues, a.settings.alerts, now_ms())
    finally:
        delivered += deliver_due(a.issues, a.settings.webhooks)
    return {"seasonEnds": told, "alerts": alerts, "delivered": delivered}
