"""The webhooks a studio registers (with a server key): a name, a URL, the secret that signs each
delivery, and the kinds of alert it takes; and each one's delivery log. The secret is never read
back."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports.cursors import Kind, decode_ordered, of_scope, ordered_position, page_of
from ports.errors import Conflict, InvalidField, NotFound
from ports.issues import ALERT_KINDS, AlertKind, Delivery, DeliveryStatus, IssueStore, Webhook
from ports.limits import SECRET_PATTERN, name_pattern
from ports.timeutil import Time, to_rfc3339
from webhooks.delivery import RefusedAddress, WebhookPolicy, check_url

NAME_PATTERN = name_pattern("A-Za-z0-9._-", 64)
MAX_DELIVERIES = 100
# the webhooks a deployment holds: their listing is one answer (some 140 bytes each), and each run
# of the delivery job may reach every one
MAX_WEBHOOKS = 1_000
_CURSOR_KIND = Kind.DELIVERIES


class WebhookBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    url: Annotated[str, Field(min_length=1, max_length=2048, description="http or https")]
    secret: Annotated[str, Field(min_length=16, max_length=256, pattern=SECRET_PATTERN,
                                 description="signs each delivery: ASCII letters, digits and punctuation")]
    alerts: Annotated[list[AlertKind], Field(min_length=1, max_length=len(ALERT_KINDS))]


@with_config(ConfigDict(extra="forbid"))
class WebhookView(TypedDict):
    name: str
    url: str
    alerts: list[str]
    updatedAt: Time


@with_config(ConfigDict(extra="forbid"))
class WebhookList(TypedDict):
    webhooks: list[WebhookView]


@with_config(ConfigDict(extra="forbid"))
class DeliveryView(TypedDict):
    alertKey: str
    kind: str
    text: str
    status: DeliveryStatus
    attempts: int
    nextAttempt: Time | None
    lastStatusCode: int | None
    lastError: str | None
    updatedAt: Time


@with_config(ConfigDict(extra="forbid"))
class DeliveryPage(TypedDict):
    deliveries: list[DeliveryView]
    nextCursor: str | None


def _view(webhook: Webhook) -> WebhookView:
    return {"name": webhook.name, "url": webhook.url, "alerts": list(webhook.kinds),
            "updatedAt": to_rfc3339(webhook.updated_at)}


def put(issues: IssueStore, policy: WebhookPolicy, name: str, body: WebhookBody, now: int) -> tuple[bool, WebhookView]:
    try:
        # the address a host resolves to is checked at each delivery: it may change after this
        check_url(body.url, policy, resolve=False)
    except RefusedAddress as exc:
        raise InvalidField(f"url must be {exc}", "url") from None
    known = issues.webhooks()
    if len(known) >= MAX_WEBHOOKS and all(w.name != name for w in known):
        raise Conflict(f"this deployment holds at most {MAX_WEBHOOKS:,} webhooks: delete one first")
    webhook = Webhook(name, body.url, body.secret, tuple(dict.fromkeys(body.alerts)), now)
    return issues.put_webhook(webhook), _view(webhook)


def listing(issues: IssueStore) -> WebhookList:
    return {"webhooks": [_view(w) for w in issues.webhooks()]}


def delete(issues: IssueStore, name: str) -> None:
    if not issues.delete_webhook(name):
        raise NotFound(f"no webhook {name!r}")


def _delivery(delivery: Delivery, kind: str, text: str) -> DeliveryView:
    return {"alertKey": delivery.alert_key, "kind": kind, "text": text, "status": delivery.status,
            "attempts": delivery.attempts,
            "nextAttempt": to_rfc3339(delivery.next_attempt) if delivery.status == "pending" else None,
            "lastStatusCode": delivery.last_code, "lastError": delivery.last_error,
            "updatedAt": to_rfc3339(delivery.updated_at)}


def deliveries(issues: IssueStore, name: str, *, limit: int, cursor: str | None) -> DeliveryPage:
    if not any(w.name == name for w in issues.webhooks()):
        raise NotFound(f"no webhook {name!r}")
    kind = of_scope(_CURSOR_KIND, name)
    page, after = page_of(issues.deliveries(name, decode_ordered(cursor, kind), limit + 1), limit, kind,
                          lambda last: ordered_position(last[0].updated_at, last[0].alert_key))
    return {"deliveries": [_delivery(d, a.kind, str(a.body.get("text", a.kind))) for d, a in page],
            "nextCursor": after}
