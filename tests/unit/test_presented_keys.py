"""The key a request presents, as the local gateway reads it (found from outside, by a review with
every kind of key): a key given twice is refused, not read as whichever copy the parser kept, which
a proxy or WAF in front may read otherwise; the Unreal route's key is its path's last segment
decoded, as API Gateway hands it to the key source; and the keys configured are ones a header can
present, each listed once."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from api.access import ApiKeys, TitleKey
from cli.main import main
from local_runtime.gateway import Gateway, Handler, http_config
from local_runtime.process import free_port
from ports.scopes import SkuScope
from tests.uvicorn_thread import running

KEYS = ApiKeys(ingest=[TitleKey(key="title-a-key", skus=["titlea:pc", "titlea:secret-console"]), "open-ingest"],
               read=["read-key-1"])


class KeyIdGateway(Gateway):
    """The gateway whose every function answers the id of the key it was let through with: what is
    tested is who the gateway lets through, not the handlers."""

    def _handler(self, function: str) -> Handler:
        def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
            return {"statusCode": 200, "body": json.dumps(event["requestContext"]["identity"]["apiKeyId"])}
        return handler


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with running(http_config(KeyIdGateway(KEYS), "127.0.0.1", free_port())) as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        yield http


def refused(answer: httpx.Response) -> bool:
    return answer.status_code == 401 and answer.json()["error"] == "unauthorized"


@pytest.mark.parametrize("first, second", [("read-key-1", "open-ingest"), ("open-ingest", "read-key-1"),
                                           ("read-key-1", "read-key-1")])
def test_an_api_key_header_given_twice_is_refused_whichever_copy_is_whose(client: httpx.Client, first: str,
                                                                         second: str):
    headers = [("x-api-key", first), ("x-api-key", second)]
    assert refused(client.get("/v1/skus", headers=headers))
    assert refused(client.post("/v1/crashes", headers=[*headers, ("content-type", "application/json")], content=b"{}"))


@pytest.mark.parametrize("headers, query", [
    ([("x-sentry-auth", "Sentry sentry_key=read-key-1"), ("x-sentry-auth", "Sentry sentry_key=title-a-key")], ""),
    ([("x-sentry-auth", "Sentry sentry_key=title-a-key"), ("x-sentry-auth", "Sentry sentry_key=read-key-1")], ""),
    ([("x-sentry-auth", "Sentry sentry_key=read-key-1, sentry_key=title-a-key")], ""),
    ([("authorization", "Sentry sentry_key=title-a-key"), ("authorization", "Sentry sentry_key=open-ingest")], ""),
    ([], "?sentry_key=read-key-1&sentry_key=title-a-key"),
    ([], "?sentry_key=title-a-key&sentry_key=title-a-key"),
])
def test_a_sentry_key_given_twice_is_refused(client: httpx.Client, headers: list[tuple[str, str]], query: str):
    answer = client.post(f"/api/7/envelope/{query}", headers=[*headers, ("content-type", "text/plain")], content=b"{}")
    assert refused(answer), answer.text


def test_the_unreal_key_is_the_paths_last_segment_decoded(client: httpx.Client):
    """API Gateway gives the key source `foo/open-ingest`, no key; serve read `open-ingest` from
    the decoded path's last part."""
    assert refused(client.post("/api/2/unreal/foo%2Fopen-ingest/", content=b"x"))
    answer = client.post("/api/2/unreal/open%2Dingest/", content=b"x")
    assert answer.status_code == 200 and answer.json() == "ingest-1"


def test_a_sentry_key_given_once_still_passes(client: httpx.Client):
    answer = client.post("/api/7/envelope/?sentry_key=title-a-key", headers={"content-type": "text/plain"},
                         content=b"{}")
    assert answer.status_code == 200 and answer.json() == "ingest-0"


@pytest.mark.parametrize("head, expected", [
    ("", b"HTTP/1.1 401 "),  # a key in the trailer alone is none
    ("x-api-key: read-key-1\r\n", b"HTTP/1.1 200 "),  # the header's key, given once
])
def test_a_trailer_field_is_no_header(client: httpx.Client, head: str, expected: bytes):
    """Found from outside: the fields after a chunked body were read as the request's headers when
    the request came in one read, so a key, a media type or an Idempotency-Key a proxy in front never
    saw in the head it checked got through (RFC 9110 §6.5.1: a trailer never merges with the header)."""
    request = (f"GET /v1/skus HTTP/1.1\r\nHost: localhost\r\n{head}Transfer-Encoding: chunked\r\n\r\n"
               "0\r\nx-api-key: read-key-1\r\n\r\n").encode()
    with socket.create_connection((client.base_url.host, client.base_url.port), timeout=5) as sock:
        sock.sendall(request)
        answer = sock.recv(65536)
    assert answer.startswith(expected), answer


def test_a_title_keys_refusal_names_no_other_sku_of_its_title():
    """The key ships in the game: its 403 listed every sku of the title, unreleased platforms too."""
    scope = SkuScope(frozenset({"titlea:pc", "titlea:secret-console"}))
    with pytest.raises(Exception, match="may not post sku other:pc") as refusal:
        scope.check(["titlea:pc", "other:pc"])
    assert "secret-console" not in str(refusal.value) and "titlea:pc" not in str(refusal.value)


@pytest.mark.parametrize("keys", [
    {"ingest": ["k-1", {"key": "k-1", "skus": ["a:b"]}]},
    {"ingest": [{"key": "k-1", "skus": ["a:b"]}, {"key": "k-1", "skus": ["c:d"]}]},
    {"read": ["k-1", "k-1"]},
])
def test_a_key_listed_twice_under_one_role_is_refused(keys: dict[str, list[Any]]):
    """The last entry won: a title key listed again unscoped posted any sku."""
    with pytest.raises(ValidationError, match="listed twice"):
        ApiKeys.model_validate(keys)


@pytest.mark.parametrize("key", ["", " k-1", "k-1 ", "k 1", "k\t1", "k\u00e9y", "k\x00"])
def test_a_key_no_header_can_present_is_refused(key: str):
    """An empty key counted as keys configured (serve then left loopback, with no key that could
    authenticate), and one with a space around it could never match a header's trimmed value."""
    for keys in ({"read": [key]}, {"ingest": [{"key": key, "skus": ["a:b"]}]}):
        with pytest.raises(ValidationError, match="visible ASCII"):
            ApiKeys.model_validate(keys)


def test_serve_names_the_variable_of_a_key_listed_twice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("BLACKBOX_API_KEYS__INGEST", '[{"key": "k-twice", "skus": ["a:b"]}, "k-twice"]')

    def listen(host: str, port: int) -> None:
        raise AssertionError("serve went as far as binding its port")

    monkeypatch.setattr("local_runtime.server.listen", listen)
    assert main(["serve", "--data-dir", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "BLACKBOX_API_KEYS__INGEST" in line and "listed twice" in line and "k-twice" not in line, line


def test_without_keys_a_sentry_sdks_protocol_and_its_one_auth_are_checked_too():
    """Found from outside: with no keys configured the gateway read no Sentry auth at all, and
    dropped its headers before the handler: a protocol of 8 in X-Sentry-Auth, and two auths, were 200."""
    with running(http_config(KeyIdGateway(ApiKeys()), "127.0.0.1", free_port())) as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"content-type": "text/plain"}) as http:
        newer = http.post("/api/42/envelope/", headers={"x-sentry-auth": "Sentry sentry_key=k, sentry_version=8"},
                          content=b"{}")
        assert newer.status_code == 400 and newer.json()["field"] == "X-Sentry-Auth", newer.text
        assert refused(http.post("/api/42/envelope/?sentry_key=k", headers={"x-sentry-auth": "Sentry sentry_key=k"},
                                 content=b"{}"))
        assert http.post("/api/42/envelope/", content=b"{}").json() is None  # no key: no key id, let through
        # and with no keys set, serve takes any api key, given twice too
        assert http.get("/v1/skus", headers=[("x-api-key", "a"), ("x-api-key", "b")]).status_code == 200
