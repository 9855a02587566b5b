"""The webhooks' delivery against a receiver on loopback: signed bodies, retries with exponential
backoff up to the last attempt, a claim that keeps two runs from sending one delivery twice, and the
addresses a webhook may not reach."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded.index import SqliteIndexDatabase
from adapters.embedded.issues import SqliteIssueStore
from crashes.alert_history import alert_history
from ports.errors import Conflict, InvalidField, StoreUnavailable
from ports.issues import Alert, Webhook
from ports.limits import PAGE_BYTES, carried_bytes
from webhooks import endpoints
from webhooks.delivery import (
    ALERT_HEADER,
    CLAIM_MS,
    SIGNATURE_HEADER,
    RefusedAddress,
    WebhookPolicy,
    body_of,
    check_url,
    deliver_due,
    post,
    sign,
)
from webhooks.endpoints import WebhookBody, deliveries

SECRET = "0123456789abcdef"
LOCAL = WebhookPolicy(allow_private=True, backoff_s=30, max_backoff_s=100, max_attempts=4)


class Receiver:
    """Answers each POST with the next of `answers` (the last one from then on)."""

    def __init__(self, answers: list[int]) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        got, pending = self.got, list(answers)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                got.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(pending.pop(0) if len(pending) > 1 else pending[0])
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def issues(tmp_path: Path) -> Iterator[SqliteIssueStore]:
    store = SqliteIssueStore(SqliteIndexDatabase(tmp_path / "index.sqlite"))
    yield store
    store.close()


def receiving(issues: SqliteIssueStore, answers: list[int]) -> Iterator[Receiver]:
    receiver = Receiver(answers)
    issues.put_webhook(Webhook("ops", receiver.url, SECRET, ("regressed",), 0))
    # receivedAt in epoch ms, as an earlier release stored it
    issues.raise_alert(Alert("regressed:g:ab:1", "regressed", 1000, {"text": "ab regressed", "episode": 1,
                                                                     "receivedAt": 1000}))
    yield receiver
    receiver.server.shutdown()


def test_a_delivery_is_signed_and_slack_compatible(issues: SqliteIssueStore) -> None:
    for receiver in receiving(issues, [200]):
        assert deliver_due(issues, LOCAL, now=5_000) == 1
        [(headers, body)] = receiver.got
        t, v1 = (part.split("=", 1)[1] for part in headers[SIGNATURE_HEADER].split(","))
        assert t == "5" and hmac.compare_digest(
            v1, hmac.new(SECRET.encode(), b"5." + body, hashlib.sha256).hexdigest())
        sent = json.loads(body)
        assert sent["text"] == "ab regressed" and sent["alertKey"] == headers[ALERT_HEADER] == "regressed:g:ab:1"
        # times as every answer gives them (docs/api.md)
        assert sent["createdAt"] == "1970-01-01T00:00:01.000Z"
        assert sent["alert"] == {"text": "ab regressed", "episode": 1, "receivedAt": "1970-01-01T00:00:01.000Z"}
        assert deliver_due(issues, LOCAL, now=10**12) == 0  # delivered: never again
        [(delivery, _)] = issues.deliveries("ops", None, 5)
        assert (delivery.status, delivery.attempts, delivery.last_code) == ("delivered", 1, 200)


def test_failures_back_off_exponentially_until_the_last_attempt(issues: SqliteIssueStore) -> None:
    for receiver in receiving(issues, [500]):
        now, waits = 1000, []  # the alert's time: its deliveries are due from then
        for _ in range(LOCAL.max_attempts):
            assert deliver_due(issues, LOCAL, now=now) == 0
            [(delivery, _)] = issues.deliveries("ops", None, 5)
            waits.append(delivery.next_attempt - now)
            assert deliver_due(issues, LOCAL, now=delivery.next_attempt - 1) == 0  # not due yet
            now = delivery.next_attempt
        assert waits == [30_000, 60_000, 100_000, 100_000]  # doubling, up to max_backoff_s
        assert (delivery.status, delivery.attempts, delivery.last_code, delivery.last_error) == (
            "failed", 4, 500, "HTTP 500")
        assert len(receiver.got) == 4
        assert deliver_due(issues, LOCAL, now=10**12) == 0 and len(receiver.got) == 4


def test_a_run_that_lost_the_claim_does_not_send(issues: SqliteIssueStore) -> None:
    for receiver in receiving(issues, [204]):
        [(due, _, _)] = issues.due(2000, 10)
        assert issues.claim(due, 2000 + CLAIM_MS, 2000)  # another run has it
        assert deliver_due(issues, LOCAL, now=2000) == 0 and receiver.got == []
        # it sent nothing and was cut off: the claim runs out, and the next run sends it
        assert deliver_due(issues, LOCAL, now=2000 + CLAIM_MS) == 1 and len(receiver.got) == 1


def test_a_private_address_is_refused_at_delivery_unless_allowed(issues: SqliteIssueStore) -> None:
    for receiver in receiving(issues, [204]):
        assert deliver_due(issues, WebhookPolicy(), now=1000) == 0 and receiver.got == []
        [(delivery, _)] = issues.deliveries("ops", None, 5)
        # found from outside: "refused: a host that resolves" read as the reason, not what it must be
        assert delivery.status == "pending" and (delivery.last_error or "").startswith(
            "refused: the URL must be a public address")


@pytest.mark.parametrize("url", ["ftp://hooks.example.com/x", "file:///etc/passwd", "http://", "http://[::1",
                                 "https://user:pw@hooks.example.com/", "http://127.0.0.1/", "http://10.1.2.3/",
                                 "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]/",
                                 "http://localhost:8080/", "http://api.localhost/", "http://0.0.0.0/",
                                 # found from outside: taken at registration, refused (or worse) only later
                                 "http://localhost./", "http://LOCALHOST./", "http://127.1/", "http://2130706433/",
                                 "http://0x7f000001/", "http://0177.0.0.1/", "http://[64:ff9b::a9fe:a9fe]/",
                                 "http://[64:ff9b::a00:1]/", "http://[2002:a9fe:a9fe::1]/", "http://[::127.0.0.1]/",
                                 "http://a..com/hook", "http://" + "a" * 64 + ".com/", "http://ex ample.com/",
                                 "http://example.com/\r\nX: y", "http://example.com/\x00",
                                 # found from outside again: a host not in ASCII, which IDNA maps to
                                 # loopback or the metadata service; one DNS cannot carry; multicast
                                 "http://①⑥⑨.②⑤④.①⑥⑨.②⑤④/latest/meta-data/", "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",
                                 "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "http://①②⑦.0.0.1:18099/", "http://bücher.example/",
                                 "http://%31%32%37.0.0.1/", "http://xn--/",
                                 "http://224.0.0.1/", "http://[ff02::1]/", "http://[64:ff9b::e000:1]/",
                                 # a port no connection can reach, taken at registration
                                 "http://hooks.example.com:0/", "https://hooks.example.com:00/",
                                 # found from outside: an address with a resolver's trailing dot; and
                                 # IPv4 in SIIT's translated form (::ffff:0:0/96)
                                 "http://127.0.0.1./", "http://169.254.169.254./", "http://[::ffff:0:127.0.0.1]/",
                                 # found from outside: a label that begins or ends with a hyphen
                                 "http://-bad-.com/", "https://hooks-.example.com/", "http://a.-b.com/",
                                 # found from outside: reserved IPv6 Python 3.11 calls global (site-local,
                                 # documentation, SRv6, the dummy prefix)
                                 "http://[fec0::1]/", "http://[fefe::a9fe:a9fe]/", "http://[3fff::1]/",
                                 "http://[5f00::1]/", "http://[100:0:0:1::1]/"])
def test_what_a_webhook_may_not_point_at(url: str) -> None:
    with pytest.raises(RefusedAddress):
        check_url(url, WebhookPolicy(), resolve=False)


@pytest.mark.parametrize("secret", [" " * 16, "whsec-0123456789abcdef\n", " whsec-0123456789abcdef",
                                    "whsec-0123456789\tabcdef", "whsec-0123456789abcdef\x00"])
def test_a_secret_is_printable_without_spaces(secret: str) -> None:
    """Found from outside: a secret of 16 spaces was taken; one pasted with its line's end signs
    every delivery with a byte its receiver does not hold."""
    with pytest.raises(ValueError, match="secret"):
        WebhookBody.model_validate({"url": "https://example.com/hook", "secret": secret, "alerts": ["regressed"]})


def test_a_name_that_resolves_to_loopback_is_refused_and_private_is_allowed_when_set() -> None:
    with pytest.raises(RefusedAddress):
        check_url("http://2130706433/", WebhookPolicy(), resolve=True)  # 127.0.0.1 as a number
    check_url("https://hooks.example.com/x", WebhookPolicy(), resolve=False)
    check_url("https://xn--bcher-kva.example/x", WebhookPolicy(), resolve=False)  # bücher, as DNS carries it
    check_url("http://127.0.0.1:9/x", WebhookPolicy(allow_private=True), resolve=True)


def test_the_signature_is_an_hmac_of_the_time_and_the_body() -> None:
    body = body_of(Alert("k", "new-group", 1, {"text": "hi"}))
    assert sign("s", 1700000000, body) == (
        "t=1700000000,v1=" + hmac.new(b"s", b"1700000000." + body, hashlib.sha256).hexdigest())
    assert json.loads(body)["text"] == "hi"


def test_a_webhook_that_cannot_be_sent_fails_alone_and_says_why(issues: SqliteIssueStore) -> None:
    # found from outside: a host no DNS name can be (stored before registration refused it) raised
    # out of the run, whose deliveries behind it were never tried; its own stayed pending forever
    issues.put_webhook(Webhook("bad", "http://a..com/hook", SECRET, ("regressed",), 0))
    for _ in receiving(issues, [204]):
        assert deliver_due(issues, WebhookPolicy(), now=1000) == 0  # the other refused: its receiver is local
        [(bad, _)] = issues.deliveries("bad", None, 5)
        [(other, _)] = issues.deliveries("ops", None, 5)
        assert bad.status == other.status == "pending" and bad.attempts == other.attempts == 1
        assert bad.last_error and (other.last_error or "").startswith("refused")


class _RawReceiver(threading.Thread):
    """A receiver of one connection, which `answer` answers on the bytes' level."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/raw"

    def run(self) -> None:
        with suppress(OSError):
            connection, _ = self.listener.accept()
            with connection:
                self.answer(connection)

    def answer(self, connection: socket.socket) -> None:
        raise NotImplementedError


class _Drip(_RawReceiver):
    """A receiver that sends its answer's head a line a second, never quite done."""

    def answer(self, connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\n")
        for n in range(30):
            time.sleep(1)
            connection.sendall(f"X-{n}: drip\r\n".encode())


def test_a_receiver_that_answers_a_byte_at_a_time_has_the_timeout_in_all(issues: SqliteIssueStore) -> None:
    # found from outside: the timeout bounded each read, so a drip held the run (every other
    # webhook's delivery behind it) for as long as it kept sending
    drip = _Drip()
    drip.start()
    issues.put_webhook(Webhook("drip", drip.url, SECRET, ("regressed",), 0))
    for receiver in receiving(issues, [204]):
        started = time.monotonic()
        assert deliver_due(issues, WebhookPolicy(allow_private=True, timeout_s=2), now=1000) == 1
        assert time.monotonic() - started < 4 and len(receiver.got) == 1
        [(held, _)] = issues.deliveries("drip", None, 5)
        assert held.status == "pending" and "timed out" in (held.last_error or "")
    drip.listener.close()


class _Held(Receiver):
    """Answers 204 once `release` is set (or after 10 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__([204])
        handler, release = self.server.RequestHandlerClass, self.release

        class Holding(handler):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                release.wait(10)
                super().do_POST()

        self.server.RequestHandlerClass = Holding


def test_a_receiver_that_hangs_holds_up_its_own_deliveries_not_another_webhooks(issues: SqliteIssueStore) -> None:
    """Found from outside: a run sent every due delivery in turn, so each alert reached a fast
    webhook only after a hanging one's timeout, and a run could take 100 of them."""
    held = _Held()
    issues.put_webhook(Webhook("held", held.url, SECRET, ("regressed",), 0))
    for receiver in receiving(issues, [204]):
        for n in range(2, 4):
            issues.raise_alert(Alert(f"regressed:g:ab:{n}", "regressed", 1000, {"text": "again"}))
        run = threading.Thread(target=deliver_due, args=(issues, LOCAL), kwargs={"now": 5_000})
        run.start()
        deadline = time.monotonic() + 5
        while len(receiver.got) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(receiver.got) == 3 and not held.got  # while the other still holds its first
        held.release.set()
        run.join()
        assert len(held.got) == 3
    held.server.shutdown()


def test_a_failing_receiver_is_rested_with_its_failed_delivery(issues: SqliteIssueStore) -> None:
    """Found from outside: each run tried up to 5 of a failing webhook's due deliveries, so one that
    hung cost its timeout 5 times a run, and with 8 of them every run waited on them all."""
    for receiver in receiving(issues, [500, 204]):
        for n in range(2, 4):
            issues.raise_alert(Alert(f"regressed:g:ab:{n}", "regressed", 1000, {"text": "again"}))
        assert deliver_due(issues, LOCAL, now=5_000) == 0
        assert len(receiver.got) == 1  # the first failed: the rest of its turn waits
        assert deliver_due(issues, LOCAL, now=6_000) == 0 and len(receiver.got) == 1  # rested
        # the failed one's backoff (30 s) ends the rest: all three then, in one run
        assert deliver_due(issues, LOCAL, now=5_000 + 30_000) == 3 and len(receiver.got) == 4
        attempts = sorted(d.attempts for d, _ in issues.deliveries("ops", None, 5))
        assert attempts == [1, 1, 2]  # the rested two were not attempts


def test_a_run_reaches_every_webhook_with_due_deliveries(issues: SqliteIssueStore) -> None:
    """Found from outside: a run took 100 due deliveries in all, 5 a webhook, so of 200 webhooks
    with alerts waiting it reached 20, and the others waited for later runs."""
    receiver = Receiver([204])
    for w in range(30):
        issues.put_webhook(Webhook(f"w{w:02d}", receiver.url, SECRET, ("regressed",), 0))
    for n in range(5):
        issues.raise_alert(Alert(f"regressed:g:ab:{n}", "regressed", 1000, {"text": "again"}))
    assert deliver_due(issues, LOCAL, now=5_000) == 150
    receiver.server.shutdown()


def test_a_run_told_to_stop_claims_no_more(issues: SqliteIssueStore) -> None:
    """Found from outside: a run went on through its due deliveries while serve stopped, and was
    killed within one, which its next run sent again."""
    for receiver in receiving(issues, [204]):
        issues.raise_alert(Alert("regressed:g:ab:2", "regressed", 1000, {"text": "again"}))
        assert deliver_due(issues, LOCAL, now=5_000, stopping=receiver.got.__len__) == 1  # stops once one is in
        assert [d.status for d, _ in issues.deliveries("ops", None, 5)].count("pending") == 1
        assert deliver_due(issues, LOCAL, now=5_000) == 1 and len(receiver.got) == 2


class _FailingClaims:
    """The store, whose claims of one webhook's deliveries fail (its engine did not answer)."""

    def __init__(self, store: SqliteIssueStore, webhook: str) -> None:
        self._store, self._webhook = store, webhook

    def claim(self, delivery: Any, *args: Any) -> bool:
        if delivery.webhook == self._webhook:
            raise StoreUnavailable("issues")
        return self._store.claim(delivery, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_store_failure_in_one_webhooks_turn_leaves_the_others_whole(issues: SqliteIssueStore) -> None:
    """Found in review: the first failure of a webhook's thread was raised out of the run, which
    cancelled the turns not yet started and left those under way running beside the next run."""
    bad = Receiver([204])
    issues.put_webhook(Webhook("bad", bad.url, SECRET, ("regressed",), 0))
    for receiver in receiving(issues, [204]):
        issues.raise_alert(Alert("regressed:g:ab:2", "regressed", 1000, {"text": "again"}))
        assert deliver_due(_FailingClaims(issues, "bad"), LOCAL, now=5_000) == 2  # type: ignore[arg-type]
        assert len(receiver.got) == 2 and bad.got == []
    bad.server.shutdown()


def test_a_delivery_goes_to_the_address_that_was_checked(issues: SqliteIssueStore,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # found from outside: the check resolved the name, and the request resolved it again; a name
    # that answers a public address, then (rebinding) a private one, passed and reached the latter
    for receiver in receiving(issues, [204]):
        port = int(receiver.url.split(":")[2].split("/")[0])
        answers = iter(["192.0.2.1", "127.0.0.1"])  # TEST-NET-1 (unroutable), then loopback

        def rebinding(host: str, *args: Any, answers: Iterator[str] = answers, port: int = port,
                      **kwargs: Any) -> list[Any]:
            address = host if host[0].isdigit() else next(answers, "127.0.0.1")  # an address is itself
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

        issues.put_webhook(Webhook("ops", f"http://hooks.example.com:{port}/hook", SECRET, ("regressed",), 0))
        monkeypatch.setattr(socket, "getaddrinfo", rebinding)
        monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(lambda a: str(a) == "192.0.2.1"))
        assert deliver_due(issues, WebhookPolicy(timeout_s=1), now=1000) == 0
        assert receiver.got == []


def test_a_cursor_of_one_webhooks_deliveries_or_one_skus_alerts_is_refused_by_another(
        issues: SqliteIssueStore) -> None:
    # found from outside: a listing's cursor was taken by the same listing of another webhook or sku
    for name in ("ops", "all"):
        issues.put_webhook(Webhook(name, "https://hooks.example.com/x", SECRET, ("regressed",), 0))
    for n in range(3):
        for sku in ("g", "h"):
            issues.raise_alert(Alert(f"regressed:{sku}:ab:{n}", "regressed", 1000 + n, {"sku": sku, "text": "again"}))
    cursor = deliveries(issues, "ops", limit=1, cursor=None)["nextCursor"]
    assert deliveries(issues, "ops", limit=1, cursor=cursor)["deliveries"]
    with pytest.raises(InvalidField):
        deliveries(issues, "all", limit=1, cursor=cursor)
    cursor = alert_history(issues, "g", from_ms=0, to_ms=10_000, limit=1, cursor=None)["nextCursor"]
    assert alert_history(issues, "g", from_ms=0, to_ms=10_000, limit=1, cursor=cursor)["alerts"]
    with pytest.raises(InvalidField):
        alert_history(issues, "h", from_ms=0, to_ms=10_000, limit=1, cursor=cursor)


def test_a_page_of_alert_history_fits_the_answer_lambda_carries(issues: SqliteIssueStore) -> None:
    """From a review: each line carries its delivery to every webhook that took its kind, each with
    up to 500 characters of the receiver's answer: 40 alerts to 200 failing webhooks were 17 MB as
    Lambda carries the answer, past the 6 MB it answers. A page stops short, its cursor going on."""
    for n in range(200):
        issues.put_webhook(Webhook(f"w{n:03}", "https://hooks.example.com/x", SECRET, ("regressed",), 0))
    keys = [f"regressed:g:ab:{n}" for n in range(40)]
    for n, key in enumerate(keys):
        issues.raise_alert(Alert(key, "regressed", 1000 + n, {"sku": "g", "text": "again"}))
    for delivery, _, _ in issues.due(2000, 10_000):
        assert issues.claim(delivery, 70_000, 2000)
        assert issues.attempted(replace(delivery, status="failed", attempts=delivery.attempts + 1, last_code=500,
                                        last_error='"' * 500, updated_at=2000))
    listed: list[str] = []
    cursor = None
    while True:
        page = alert_history(issues, "g", from_ms=0, to_ms=10_000, limit=100, cursor=cursor)
        assert carried_bytes(json.dumps(page)) <= PAGE_BYTES + 512 * 1024
        listed += [line["key"] for line in page["alerts"]]
        if (cursor := page["nextCursor"]) is None:
            break
    assert listed == keys[::-1]


def test_an_alert_s_text_carries_no_slack_formatting_a_client_sent() -> None:
    """Found from outside: a crash's buildVersion `<!channel> <https://evil.example/fix|click to fix>` reached
    the text as it was, which Slack reads as an @channel ping and a link under a false label."""
    text = "New crash group in skyrift:pc (build <!channel> <https://evil.example/fix|click to fix> & more)"
    sent = json.loads(body_of(Alert("k", "new-group", 1, {"text": text})))
    assert sent["text"] == ("New crash group in skyrift:pc (build &lt;!channel&gt; "
                            "&lt;https://evil.example/fix|click to fix&gt; &amp; more)")
    assert sent["alert"]["text"] == text  # the alert's own fields as they are


def test_a_deployment_holds_a_bounded_number_of_webhooks(issues: SqliteIssueStore,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: GET /v1/webhooks is one answer of them all (715 KB for 5,200), and their
    number had no bound."""
    monkeypatch.setattr(endpoints, "MAX_WEBHOOKS", 3)
    body = WebhookBody(url="https://example.com/hook", secret=SECRET, alerts=["regressed"])
    for n in range(3):
        assert endpoints.put(issues, LOCAL, f"w{n}", body, 0)[0]
    with pytest.raises(Conflict) as refused:
        endpoints.put(issues, LOCAL, "w3", body, 0)
    assert "at most 3 webhooks" in refused.value.message
    assert endpoints.put(issues, LOCAL, "w1", body, 1)[0] is False  # replaced, at the bound
    endpoints.delete(issues, "w0")
    assert endpoints.put(issues, LOCAL, "w3", body, 2)[0]


class _CutOff(_RawReceiver):
    """A receiver that reads the request whole, sends the start of an answer's head, and closes."""

    def __init__(self, head: bytes) -> None:
        super().__init__()
        self.head = head

    def answer(self, connection: socket.socket) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += connection.recv(65536)
        head, _, body = request.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += connection.recv(65536)
        connection.sendall(self.head)


ALERT = Alert("regressed:g:ab:1", "regressed", 1000, {"text": "ab regressed", "episode": 1})


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 OK\r\nContent-Le", b"HTTP/1.1 204", b"HTTP/1.1 200 OK\r\n"])
def test_an_answer_whose_head_is_cut_off_is_no_delivery(head: bytes) -> None:
    """Found from outside: a receiver that closed partway through its answer's head had delivered."""
    cut = _CutOff(head)
    cut.start()
    answer = post(Webhook("cut", cut.url, SECRET, ("regressed",), 0), ALERT, LOCAL, 1000)
    assert answer.code is None and "cut off" in (answer.error or ""), answer
    cut.listener.close()


def test_a_name_that_takes_long_to_resolve_has_the_timeout_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: the name's lookup came before the deadline, so a name whose DNS server
    never answers held an attempt for the resolver's own timeout (up to 30 s)."""
    receiver = Receiver([204])
    resolve = socket.getaddrinfo

    def slow(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "slow.example":
            time.sleep(3)
            host = "127.0.0.1"
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    url = receiver.url.replace("127.0.0.1", "slow.example")
    started = time.monotonic()
    answer = post(Webhook("slow", url, SECRET, ("regressed",), 0), ALERT, WebhookPolicy(allow_private=True,
                                                                                        timeout_s=1), 1000)
    assert time.monotonic() - started < 2 and answer.code is None and "timed out" in (answer.error or ""), answer
    assert post(Webhook("ok", receiver.url, SECRET, ("regressed",), 0), ALERT, LOCAL, 1000).code == 204
    receiver.server.shutdown()


def test_names_whose_dns_hangs_hold_up_no_other_webhook(issues: SqliteIssueStore,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found from outside: every attempt's lookup, an address's too, waited for one of 8 threads,
    and a lookup that hangs keeps its thread past the attempt's timeout: with 16 webhooks whose
    DNS never answered, a webhook at an address and one whose name resolved at once timed out."""
    resolve, answered = socket.getaddrinfo, threading.Event()

    def hanging(host: str, *args: Any, **kwargs: Any) -> Any:
        if host.endswith(".slow.example"):
            answered.wait(30)  # a resolver's timeout, till the test ends
            raise socket.gaierror("no answer")
        return resolve("127.0.0.1" if host == "fast.example" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    receiver = Receiver([204])
    for n in range(16):
        issues.put_webhook(Webhook(f"a{n:02}", f"http://h{n}.slow.example/hook", SECRET, ("regressed",), 0))
    issues.put_webhook(Webhook("z-address", receiver.url, SECRET, ("regressed",), 0))
    issues.put_webhook(Webhook("z-name", receiver.url.replace("127.0.0.1", "fast.example"), SECRET,
                               ("regressed",), 0))
    policy = LOCAL.model_copy(update={"timeout_s": 1})
    try:
        for n in (1, 2):
            issues.raise_alert(Alert(f"regressed:g:ab:{n}", "regressed", n * 1000, {"text": "ab regressed"}))
            # the second run tries the names that hang again first (retries go first), while the
            # lookups of the first still hang
            assert deliver_due(issues, policy, now=n * 60_000) == 2, n
        assert len(receiver.got) == 4
    finally:
        answered.set()
        receiver.server.shutdown()


def test_receivers_that_hang_delay_no_webhook_whose_last_attempt_went_through(issues: SqliteIssueStore) -> None:
    """Found from outside: a run takes the retries first, and 8 webhooks at once, so 16 receivers
    that hang delayed every other webhook's alerts by two timeouts a run. A webhook whose last
    attempt failed now goes after the others."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        refusing = f"http://127.0.0.1:{unused.getsockname()[1]}/hook"
    held = _Held()
    for receiver in receiving(issues, [204]):
        for n in range(16):
            issues.put_webhook(Webhook(f"a{n:02}", refusing, SECRET, ("regressed",), 0))
        issues.raise_alert(Alert("regressed:g:ab:2", "regressed", 2_000, {"text": "again"}))
        assert deliver_due(issues, LOCAL, now=5_000) == 2  # ops; the others failed, retried in 30 s
        for n in range(16):
            issues.put_webhook(Webhook(f"a{n:02}", held.url, SECRET, ("regressed",), 0))
        issues.raise_alert(Alert("regressed:g:ab:3", "regressed", 6_000, {"text": "and again"}))
        run = threading.Thread(target=deliver_due, args=(issues, LOCAL), kwargs={"now": 40_000})
        run.start()
        deadline = time.monotonic() + 4
        while len(receiver.got) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        got = len(receiver.got)
        held.release.set()
        run.join()
        assert got == 3  # ops's third, while the 16 still held their retries
    held.server.shutdown()


def test_an_address_with_a_resolver_s_final_dot_is_not_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """From review: `127.0.0.1.` is an address to the URL check, which then asked the resolver for
    it as a name, at once (with no thread, as an address needs none) and past the timeout."""
    asked: list[str] = []
    resolve = socket.getaddrinfo

    def recording(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording)
    receiver = Receiver([204])
    url = receiver.url.replace("127.0.0.1", "127.0.0.1.")
    assert post(Webhook("dot", url, SECRET, ("regressed",), 0), ALERT, LOCAL, 1000).code == 204
    assert asked and "127.0.0.1." not in asked
    receiver.server.shutdown()
