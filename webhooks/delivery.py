"""Delivery of the outbox: each due delivery is POSTed to its webhook, signed, and its outcome
stored; a failure is tried again with exponential backoff, up to a number of attempts. Run by a
periodic thread under `blackbox serve` and by a scheduled function in AWS (lambdas.webhooks), one
at a time: a run claims each delivery before sending it, so a second run beside it sends none twice.

A delivery is at least once: a run cut off between the receiver's 2xx and storing it sends that
alert again next run, with the same `alertKey` (and `X-Blackbox-Alert`), which the receiver can
drop. What is exactly once is the alert: one per group and episode (ports.issues)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field

from ports.issues import Alert, DeliveryStatus, IssueStore, Webhook
from ports.telemetry import logger
from ports.timeutil import now_ms

SIGNATURE_HEADER = "X-Blackbox-Signature"
ALERT_HEADER = "X-Blackbox-Alert"
# how long a run holds a delivery it is sending: another run takes it up after this
CLAIM_MS = 60_000
RUN_LIMIT = 100


class WebhookPolicy(BaseModel):
    """e.g. BLACKBOX_WEBHOOKS__ALLOW_PRIVATE=true: the loopback, private and link-local addresses a
    webhook may not reach otherwise (a receiver on the same machine, in tests)."""

    allow_private: bool = False
    timeout_s: float = Field(default=5.0, gt=0, le=30)
    max_attempts: int = Field(default=8, ge=1, le=30)
    # the wait after the first failure, doubling each time up to max_backoff_s
    backoff_s: float = Field(default=30.0, ge=0)
    max_backoff_s: float = Field(default=3600.0, ge=0)

    def next_attempt(self, attempts: int, now: int) -> int:
        wait_s: float = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempts - 1))
        return now + round(1000 * wait_s)


class RefusedAddress(ValueError):
    """A webhook URL this deployment does not call."""


def check_url(url: str, policy: WebhookPolicy, *, resolve: bool) -> None:
    """Refuses what is not http(s) with a host, and, unless allowed, a host that is or (resolve)
    resolves to a loopback, private, link-local or otherwise non-public address: a webhook must not
    be a way into the deployment's own network (the metadata service, the database)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 — a port that is no number raises here, not at delivery
    except ValueError:
        raise RefusedAddress("an http or https URL with a host") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress("an http or https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise RefusedAddress("a URL without a user or password (sign with the secret)")
    if policy.allow_private:
        return
    host = parts.hostname
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        if host.lower() == "localhost" or host.lower().endswith(".localhost"):
            raise RefusedAddress("a public address (set BLACKBOX_WEBHOOKS__ALLOW_PRIVATE=true for local receivers)"
                                 ) from None
        if not resolve:
            return
        try:
            infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise RefusedAddress(f"a host that resolves ({exc})") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if any(not a.is_global for a in addresses):
        raise RefusedAddress("a public address (set BLACKBOX_WEBHOOKS__ALLOW_PRIVATE=true for local receivers)")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def body_of(alert: Alert) -> bytes:
    """Slack-compatible (`text`) with the alert's fields beside it."""
    payload: dict[str, Any] = {"text": alert.body.get("text", alert.kind), "alertKey": alert.key, "kind": alert.kind,
                               "createdAt": alert.created_at, "alert": dict(alert.body)}
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Answer:
    code: int | None
    error: str | None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # a redirect could lead anywhere the URL check would have refused
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def post(webhook: Webhook, alert: Alert, policy: WebhookPolicy, now: int) -> Answer:
    body = body_of(alert)
    try:
        check_url(webhook.url, policy, resolve=True)
    except RefusedAddress as exc:
        return Answer(None, f"refused: {exc}")
    request = urllib.request.Request(webhook.url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "Blackbox-Webhooks/1",
        SIGNATURE_HEADER: sign(webhook.secret, now // 1000, body), ALERT_HEADER: alert.key})
    try:
        with _OPENER.open(request, timeout=policy.timeout_s) as response:
            return Answer(int(response.status), None)
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, f"HTTP {exc.code}")
    except (OSError, ValueError) as exc:
        return Answer(None, f"{type(exc).__name__}: {exc}"[:500])


def deliver_due(issues: IssueStore, policy: WebhookPolicy, now: int | None = None) -> int:
    """Sends the due deliveries (at most RUN_LIMIT); returns how many were delivered."""
    delivered = 0
    for delivery, alert, webhook in issues.due(now_ms() if now is None else now, RUN_LIMIT):
        at = now_ms() if now is None else now
        if not issues.claim(delivery, at + CLAIM_MS, at):
            continue
        answer = post(webhook, alert, policy, at)
        attempts = delivery.attempts + 1
        if answer.code is not None and 200 <= answer.code < 300:
            outcome = replace(delivery, status="delivered", attempts=attempts, last_code=answer.code, last_error=None,
                              updated_at=at)
            delivered += 1
        else:
            status: DeliveryStatus = "failed" if attempts >= policy.max_attempts else "pending"
            outcome = replace(delivery, status=status, attempts=attempts,
                              next_attempt=policy.next_attempt(attempts, at), last_code=answer.code,
                              last_error=answer.error, updated_at=at)
            logger.warning("webhook delivery failed", extra={"webhook": webhook.name, "alert": alert.key,
                                                             "attempts": attempts, "error": answer.error})
        issues.attempted(outcome)
    return delivered
