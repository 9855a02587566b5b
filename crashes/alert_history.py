"""Alert history: every alert raised for a sku, newest first, as a developer reads it after the fact
(GET /v1/alerts/history, the dashboard's panel). A new group and a regression name a crash group;
a velocity alert a group on a build; a crash-free drop a build. Velocity and crash-free drops are
episodes (crashes.alerts), with the time a run found their condition false. Each alert carries its
delivery to every webhook that took its kind. A season end is a leaderboard's, no sku's: it is in
its webhooks' deliveries, not here."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from ports.cursors import Kind, decode_ordered, of_scope, ordered_position, page_of
from ports.issues import Delivery, DeliveryStatus, IssueStore, RaisedAlert, alert_body
from ports.limits import carried_bytes, within_bytes
from ports.releases import DAY_MS
from ports.timeutil import Time, time_range, to_rfc3339

MAX_HISTORY = 100
DEFAULT_DAYS = 30
_CURSOR_KIND = Kind.ALERTS


@with_config(ConfigDict(extra="forbid"))
class AlertDelivery(TypedDict):
    webhook: str
    status: DeliveryStatus
    attempts: int
    lastStatusCode: int | None
    lastError: str | None
    updatedAt: Time


@with_config(ConfigDict(extra="forbid"))
class HistoryLine(TypedDict):
    key: str
    kind: str
    signature: str | None
    build: str | None
    text: str
    openedAt: Time
    closedAt: Time | None
    deliveries: list[AlertDelivery]
    alert: dict[str, Any]


@with_config(ConfigDict(extra="forbid"))
class AlertHistory(TypedDict):
    alerts: list[HistoryLine]
    nextCursor: str | None


def _delivery(delivery: Delivery) -> AlertDelivery:
    return {"webhook": delivery.webhook, "status": delivery.status, "attempts": delivery.attempts,
            "lastStatusCode": delivery.last_code, "lastError": delivery.last_error,
            "updatedAt": to_rfc3339(delivery.updated_at)}


def _line(raised: RaisedAlert) -> HistoryLine:
    alert = raised.alert
    body = alert_body(alert)
    signature, build = body.get("signature"), body.get("build")
    return {"key": alert.key, "kind": alert.kind,
            "signature": signature if isinstance(signature, str) else None,
            "build": build if isinstance(build, str) else None,
            "text": str(body.get("text", alert.kind)), "openedAt": to_rfc3339(alert.created_at),
            "closedAt": None if raised.closed_at is None else to_rfc3339(raised.closed_at),
            "deliveries": [_delivery(d) for d in raised.deliveries], "alert": body}


def alert_history(issues: IssueStore, sku: str, *, from_ms: int | None = None, to_ms: int | None = None,
                  limit: int, cursor: str | None) -> AlertHistory:
    from_ms, to_ms = time_range(from_ms, to_ms, lambda to: to - DEFAULT_DAYS * DAY_MS)
    kind = of_scope(_CURSOR_KIND, sku)
    before = decode_ordered(cursor, kind)
    found = issues.alert_history(sku, from_ms, to_ms, before, limit + 1)
    lines = [_line(raised) for raised in found[:limit]]
    # as many as Lambda carries: a line holds a delivery to each webhook that took its kind
    fits = within_bytes(carried_bytes(json.dumps(line)) for line in lines)
    page, after = page_of(found, fits, kind, lambda last: ordered_position(last.alert.created_at, last.alert.key))
    return {"alerts": lines[:len(page)], "nextCursor": after}
