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
import http.client
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field

from ports.issues import Alert, Delivery, DeliveryStatus, IssueStore, Webhook, alert_body
from ports.telemetry import logger
from ports.threads import kept_pool
from ports.timeutil import now_ms, to_rfc3339

SIGNATURE_HEADER = "X-Blackbox-Signature"
ALERT_HEADER = "X-Blackbox-Alert"
# how long a run holds a delivery it is sending: another run takes it up after this
CLAIM_MS = 60_000
# webhooks a run sends to at once, and each one's deliveries it takes at most (its first in turn), of
# RUN_LIMIT in all: a run reaches 200 webhooks with a backlog each. A receiver that fails one ends
# its turn and rests with it (IssueStore.rest), so one that hangs holds a run one timeout at most
PARALLEL_WEBHOOKS = 8
PER_WEBHOOK = 5
RUN_LIMIT = 200 * PER_WEBHOOK
# the names looked up at once: a run tries PARALLEL_WEBHOOKS at a time, each for the timeout at
# most (5 s by default), and a lookup that hangs keeps its thread for the resolver's timeout, so
# some 48 can hang at once without holding up a name that resolves
NAME_LOOKUPS = 64


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


Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# IPv6 ranges that carry an IPv4 address in their last 32 bits, reached through it: NAT64 (a VPC's
# DNS64 sends 64:ff9b::10.0.0.5 to 10.0.0.5) and the IPv4-compatible form
_CARRYING_IPV4 = tuple(ipaddress.IPv6Network(net) for net in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96",
                                                                "::ffff:0:0:0/96"))  # the last: SIIT's
# reserved, which Python 3.11's is_global does not know: site-local (deprecated, RFC 3879, still
# routed in some networks), documentation (RFC 9637), SRv6 segment ids (RFC 9602), the dummy prefix
# (RFC 9780)
_RESERVED_IPV6 = tuple(ipaddress.IPv6Network(net) for net in ("fec0::/10", "3fff::/20", "5f00::/16",
                                                              "100:0:0:1::/64"))
_NOT_PUBLIC = "a public address (set BLACKBOX_WEBHOOKS__ALLOW_PRIVATE=true for local receivers)"


def _numeric(host: str) -> Address | None:
    """The address a host is as a number, in any spelling a resolver takes (127.1, 2130706433,
    0x7f000001, 0177.0.0.1 are all loopback, and so is 127.0.0.1. as a name's root is); None for a
    name."""
    host = host.removesuffix(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


# a name's labels as resolvers take them (an underscore too, as some services' names have), none
# beginning or ending with a hyphen
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*\.?")


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if any(address in n for n in _CARRYING_IPV4) else None)
        if (carried is not None and not _public(carried)) or any(address in n for n in _RESERVED_IPV6):
            return False
    return address.is_global and not address.is_multicast  # is_global holds multicast


def check_url(url: str, policy: WebhookPolicy, *, resolve: bool) -> list[str]:
    """Refuses what is not http(s) with a host, and, unless allowed, a host that is or (resolve)
    resolves to a loopback, private, link-local or otherwise non-public address: a webhook must not
    be a way into the deployment's own network (the metadata service, the database). Resolving, the
    addresses checked: the delivery connects to one of them, not to what the name says by then."""
    if any(not c.isprintable() or c.isspace() for c in url):
        raise RefusedAddress("a URL without spaces or control characters (percent-encode them)")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a port that is no number (or past 65535) raises here, not at delivery
    except ValueError:
        raise RefusedAddress("an http or https URL with a host") from None
    if port == 0:
        raise RefusedAddress("a URL with a port from 1 to 65535")
    if not url.isascii():
        # a host too: IDNA maps ①②⑦.0.0.1 and fullwidth letters to 127.0.0.1 and localhost
        raise RefusedAddress("a URL in ASCII (a host name in its xn-- form, the rest percent-encoded)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress("an http or https URL with a host")
    if parts.username is not None or parts.password is not None:
        raise RefusedAddress("a URL without a user or password (sign with the secret)")
    host = parts.hostname
    address = _numeric(host)
    if address is None:
        _check_name(host, policy)
    if not resolve:
        if address is not None and not policy.allow_private and not _public(address):
            raise RefusedAddress(_NOT_PUBLIC)
        return []
    try:
        # an address as the resolver takes it: with a final dot it would be looked up as a name
        infos = socket.getaddrinfo(host if address is None else str(address),
                                   parts.port or (443 if parts.scheme == "https" else 80), proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise RefusedAddress(f"a host that resolves ({exc})") from None
    addresses = [str(info[4][0]) for info in infos]
    if not policy.allow_private and any(not _public(ipaddress.ip_address(a.split("%")[0])) for a in addresses):
        raise RefusedAddress(_NOT_PUBLIC)
    return addresses


def _check_name(host: str, policy: WebhookPolicy) -> None:
    """A host name DNS can carry, and not localhost's unless private addresses are allowed."""
    try:
        host.encode("idna")  # labels of 1 to 63 characters
        host.encode("ascii").decode("idna")  # and what an xn-- label says, punycode
    except UnicodeError:
        raise RefusedAddress("a host name DNS can carry (labels of 1 to 63 characters)") from None
    if not _HOST_NAME.fullmatch(host):
        raise RefusedAddress("a host name DNS can carry (letters, digits, - and _ in labels, - not first or last)")
    name = host.rstrip(".")
    if not policy.allow_private and (name == "localhost" or name.endswith(".localhost")):
        raise RefusedAddress(_NOT_PUBLIC)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def body_of(alert: Alert) -> bytes:
    """Slack-compatible (`text`) with the alert's fields beside it. The text holds what clients sent
    (a build, a sku): escaped as Slack asks, so that `<!channel>` or `<url|label>` is shown, not read."""
    text = str(alert.body.get("text", alert.kind))
    payload: dict[str, Any] = {"text": text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
                               "alertKey": alert.key, "kind": alert.kind, "createdAt": to_rfc3339(alert.created_at),
                               "alert": alert_body(alert)}
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Answer:
    code: int | None
    error: str | None


class _Pinned:
    """An HTTP(S) connection to addresses already checked (tried in order), named as the URL names
    its host (the Host header, TLS's SNI and certificate), within a deadline: `abort` ends what it
    is waiting for, and once aborted it connects nowhere more."""

    sock: socket.socket | None
    host: str
    port: int

    def pin(self, addresses: list[str], deadline: float) -> None:
        self._addresses, self._deadline = addresses, deadline
        self._lock = threading.Lock()
        self.aborted = self._finished = False

    def connect(self) -> None:
        failed: OSError = TimeoutError("no address to connect to")
        for address in self._addresses:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                sock = socket.create_connection((address, self.port), remaining)
            except OSError as exc:
                failed = exc
                continue
            # what http.client's own connect does: the head and the body go as two sends
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._use(sock)
            return
        raise failed

    def _use(self, sock: socket.socket) -> None:
        """`sock` as the connection's, unless the deadline has passed meanwhile."""
        with self._lock:
            if self.aborted:
                sock.close()
                raise TimeoutError("the deadline passed")
            self.sock = sock

    def abort(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.aborted = True
            with suppress(OSError):
                if self.sock is not None:
                    # the plain socket's shutdown, under TLS too: a read blocked in either returns
                    socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def finish(self) -> None:
        """The answer is in: a deadline passing from now on changes nothing."""
        with self._lock:
            self._finished = True


class _Lines:
    """A response's stream, keeping the last line read: the head's blank line, when it came whole."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.last = b""

    def readline(self, limit: int = -1) -> bytes:
        self.last = self._stream.readline(limit)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _HeadRead(http.client.HTTPResponse):
    """A response that tells whether its head ended as a head ends, with a blank line: http.client
    takes the end of the stream for one, and a receiver cut off partway would have delivered."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self._lines = _Lines(self.fp)
        self.fp = self._lines  # type: ignore[assignment]

    @property
    def head_whole(self) -> bool:
        return self._lines.last in (b"\r\n", b"\n")


class _PinnedHttp(_Pinned, http.client.HTTPConnection):
    response_class = _HeadRead


class _PinnedHttps(_Pinned, http.client.HTTPSConnection):
    response_class = _HeadRead

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        # the handshake runs on the TLS socket once it is the connection's, so `abort` reaches it;
        # SNI and the certificate name the host without a final dot (RFC 6066)
        tls = self._context.wrap_socket(  # type: ignore[attr-defined]
            self.sock, server_hostname=self.host.rstrip("."), do_handshake_on_connect=False)
        self._use(tls)
        tls.do_handshake()


def _addresses(url: str, policy: WebhookPolicy) -> list[str]:
    """check_url's addresses to connect to: an address's at once, as no resolver is asked; a name's
    within the timeout, as a DNS server that never answers holds its lookup's thread for the
    resolver's own timeout (glibc's: up to 30 s), not the run."""
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        host = None  # check_url says why
    if host is None or _numeric(host) is not None:
        return check_url(url, policy, resolve=True)
    lookup = kept_pool("webhook-names", NAME_LOOKUPS).submit(check_url, url, policy, resolve=True)
    try:
        return lookup.result(timeout=policy.timeout_s)
    except TimeoutError:
        lookup.cancel()  # one still waiting behind lookups that hang never runs
        raise


def post(webhook: Webhook, alert: Alert, policy: WebhookPolicy, now: int) -> Answer:
    """One attempt, within the policy's timeout in all (a receiver that answers a byte at a time
    holds no run longer); any failure is the attempt's answer, never the run's."""
    body = body_of(alert)
    started = time.monotonic()
    try:
        addresses = _addresses(webhook.url, policy)
    except TimeoutError:
        return Answer(None, f"timed out: the name did not resolve within {policy.timeout_s:g} s")
    except RefusedAddress as exc:  # it says what the URL must be, as a PUT's 400 does
        return Answer(None, f"refused: the URL must be {exc}")
    except Exception as exc:  # a resolver's odd failure (UnicodeError) is this delivery's
        return Answer(None, f"refused: {type(exc).__name__}: {exc}"[:500])
    parts = urllib.parse.urlsplit(webhook.url)
    https = parts.scheme == "https"
    connection: _PinnedHttp | _PinnedHttps
    if https:
        connection = _PinnedHttps(parts.hostname or "", parts.port or 443, context=ssl.create_default_context())
    else:
        connection = _PinnedHttp(parts.hostname or "", parts.port or 80)
    connection.pin(addresses, started + policy.timeout_s)
    deadline = threading.Timer(started + policy.timeout_s - time.monotonic(), connection.abort)
    deadline.daemon = True  # a process that exits mid-attempt does not wait it out
    deadline.start()
    code: int | None = None
    error = None
    try:
        connection.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body, {
            "Content-Type": "application/json", "User-Agent": "Blackbox-Webhooks/1",
            SIGNATURE_HEADER: sign(webhook.secret, now // 1000, body), ALERT_HEADER: alert.key})
        response = connection.getresponse()
        connection.finish()
        if isinstance(response, _HeadRead) and response.head_whole:
            code = response.status
        else:
            error = "the answer's head was cut off"
    except Exception as exc:  # whatever the receiver does fails this attempt alone
        code, error = None, f"{type(exc).__name__}: {exc}"[:500]
    finally:
        deadline.cancel()
        connection.close()
    # cut off, the head read so far can look whole (the end of the stream ends it)
    if connection.aborted:
        return Answer(None, f"timed out: no whole answer within {policy.timeout_s:g} s")
    if code is None:
        return Answer(None, error)
    # redirects are not followed: one could lead anywhere the URL check would have refused
    return Answer(code, None if 200 <= code < 300 else f"HTTP {code}")


# a due delivery, with its alert and its webhook
Due = tuple[Delivery, Alert, Webhook]


def deliver_due(issues: IssueStore, policy: WebhookPolicy, now: int | None = None,
                stopping: Callable[[], object] = lambda: False) -> int:
    """Sends the due deliveries (at most RUN_LIMIT), each webhook's in turn and the webhooks' at once
    (PARALLEL_WEBHOOKS at most), so that a receiver that hangs holds up its own alone; claims none
    once `stopping` says so (serve is stopping). Returns how many were delivered."""
    by_webhook: dict[str, list[Due]] = {}
    for due in issues.due(now_ms() if now is None else now, RUN_LIMIT, PER_WEBHOOK):
        by_webhook.setdefault(due[2].name, []).append(due)
    # the webhooks whose last attempt failed (a retry is their first) go after the others: receivers
    # that hang, more of them than run at once, delay none that answer
    turns = sorted(by_webhook.values(), key=lambda dues: dues[0][0].attempts > 0)
    if len(turns) < 2:
        return sum(_in_turn(issues, policy, dues, now, stopping) for dues in turns)
    return sum(kept_pool("webhooks", PARALLEL_WEBHOOKS).map(
        lambda dues: _in_turn(issues, policy, dues, now, stopping), turns))


def _in_turn(issues: IssueStore, policy: WebhookPolicy, dues: list[Due], now: int | None,
             stopping: Callable[[], object]) -> int:
    """One webhook's due deliveries, in turn: how many were delivered. A store that fails ends the
    turn, said in the log, and no other webhook's: what is left is due at the next run."""
    delivered = 0
    for due in dues:
        if stopping():
            break
        try:
            sent = _attempt(issues, policy, due, now)
            if isinstance(sent, _Failed):
                # the receiver fails: the rest of its deliveries wait with the one that failed
                issues.rest(due[2].name, sent.retry_at)
                break
            delivered += sent
        except Exception as error:
            logger.warning("webhook deliveries left for the next run", extra={"webhook": due[2].name,
                                                                              "error": repr(error)})
            break
    return delivered


@dataclass(frozen=True)
class _Failed:
    retry_at: int


def _attempt(issues: IssueStore, policy: WebhookPolicy, due: Due, now: int | None) -> int | _Failed:
    """Claims and sends one delivery, and stores how it went: 1 when delivered, 0 when another run
    claimed it first (or took it up once this one's claim ran out, and stored its failure first),
    and when its receiver failed it, the time it is tried again."""
    delivery, alert, webhook = due
    at = now_ms() if now is None else now
    if not issues.claim(delivery, at + CLAIM_MS, at):
        return 0
    answer = post(webhook, alert, policy, at)
    attempts = delivery.attempts + 1
    if answer.code is not None and 200 <= answer.code < 300:
        issues.attempted(replace(delivery, status="delivered", attempts=attempts, last_code=answer.code,
                                 last_error=None, updated_at=at))
        return 1
    status: DeliveryStatus = "failed" if attempts >= policy.max_attempts else "pending"
    retry_at = policy.next_attempt(attempts, at)
    if not issues.attempted(replace(delivery, status=status, attempts=attempts, next_attempt=retry_at,
                                    last_code=answer.code, last_error=answer.error, updated_at=at)):
        return 0  # this run outlasted its claim: the outcome stored is the next run's, its rest too
    logger.warning("webhook delivery failed", extra={"webhook": webhook.name, "alert": alert.key,
                                                     "attempts": attempts, "error": answer.error})
    return _Failed(retry_at)
