"""Bad and hostile input through `blackbox serve`: each gets the contract's 4xx, the server stays
healthy, and nothing valid sent alongside is lost. Values that only look dangerous (SQL, control
characters, emoji) are data: stored and returned exactly. Then property-based fuzzing of every
route: whatever arrives, the answer is never a 5xx and every error has the contract's body."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lambdas.functions import API_ROUTES
from local_runtime.process import Serve
from ports.cursors import Kind, encode_cursor, of_scope
from ports.limits import MAX_JSON_DEPTH

JSON = {"content-type": "application/json"}
SQL = "'; DROP TABLE crash_index; -- \" OR 1=1 /*"
PLAYER = "p'; DELETE FROM scores; -- é %00 <b>"
HOSTILE = f"{SQL} \x00\x07\u202e ☠️🔥 \U0001d518\U0001d52b\U0001d526 \\x00 %s %n {{{{7*7}}}} <script>alert(1)</script>"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    ("not json", "POST", "/v1/crashes", {"content": b"{oops", "headers": JSON}, 400, "invalid_json"),
    ("truncated json", "POST", "/v1/sessions", {"content": b'[{"sku": "g"', "headers": JSON}, 400, "invalid_json"),
    ("empty body", "POST", "/v1/scores", {"content": b"", "headers": JSON}, 400, "invalid_json"),
    ("not utf-8", "POST", "/v1/crashes", {"content": b'{"sku": "\xff\xfe"}', "headers": JSON}, 400, "invalid_json"),
    ("null body", "POST", "/v1/crashes", {"content": b"null", "headers": JSON}, 400, "invalid_field"),
    ("wrong type", "POST", "/v1/crashes", {"json": {"sku": "g", "stackTrace": 42}}, 400, "invalid_field"),
    ("sku a number", "POST", "/v1/crashes", {"json": {"sku": 7}}, 400, "invalid_field"),
    ("array for crash", "POST", "/v1/crashes", {"json": [{"sku": "g"}]}, 400, "invalid_field"),
    ("missing sku", "POST", "/v1/crashes", {"json": {"crashType": "AV"}}, 400, "missing_field"),
    ("control char in sku", "POST", "/v1/crashes", {"json": {"sku": "g\x00"}}, 400, "invalid_field"),
    ("emoji in sku", "POST", "/v1/sessions", {"json": {"sku": "g🔥", "kind": "client"}}, 400, "invalid_field"),
    ("sql in sku", "POST", "/v1/crashes", {"json": {"sku": SQL}}, 400, "invalid_field"),
    ("over 1 MiB", "POST", "/v1/crashes", {"json": {"sku": "g", "log": "x" * (1 << 20)}}, 413, "payload_too_large"),
    ("bad base64", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"a.png": "***"}}}, 400,
     "invalid_field"),
    ("base64 not canonical", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"a.png": "aGk"}}}, 400,
     "invalid_field"),
    ("attachment path", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"../../etc/passwd": "aGk="}}},
     400, "invalid_field"),
    ("attachment dir", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"logs/a.txt": "aGk="}}}, 400,
     "invalid_field"),
    ("attachment backslash", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"c:\\a.txt": "aGk="}}},
     400, "invalid_field"),
    ("attachment dot-dot", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"..": "aGk="}}}, 400,
     "invalid_field"),
    ("attachment control char", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"a\nb": "aGk="}}},
     400, "invalid_field"),
    ("attachment name a symbol", "POST", "/v1/crashes", {"json": {"sku": "g", "attachments": {"☠️.png": "aGk="}}},
     400, "invalid_field"),
    ("attachment name too long", "POST", "/v1/crashes",
     {"json": {"sku": "g", "attachments": {"a" * 129: "aGk="}}}, 400, "invalid_field"),
    ("indexed field too long", "POST", "/v1/crashes", {"json": {"sku": "g", "platform": "p" * 257}}, 400,
     "invalid_field"),
    ("player id too long", "POST", "/v1/sessions", {"json": {"sku": "g", "kind": "client", "playerId": "p" * 129}},
     400, "invalid_field"),
    ("json too deep", "POST", "/v1/crashes",
     {"content": f'{{"sku": "g", "x": {nested(MAX_JSON_DEPTH)}}}'.encode(), "headers": JSON}, 400, "invalid_field"),
    ("json absurdly deep", "POST", "/v1/crashes",
     {"content": f'{{"sku": "g", "x": {nested(200_000)}}}'.encode(), "headers": JSON}, 400, "invalid_field"),
    ("NaN in a report", "POST", "/v1/crashes", {"content": b'{"sku": "g", "x": NaN}', "headers": JSON}, 400,
     "invalid_json"),
    ("lone surrogate in a report", "POST", "/v1/crashes",
     {"content": b'{"sku": "g", "stackTrace": "\\ud800"}', "headers": JSON}, 400, "invalid_json"),
    ("lone surrogate in sessions", "POST", "/v1/sessions",
     {"content": b'{"sku": "g", "kind": "client", "x": "\\udfff"}', "headers": JSON}, 400, "invalid_json"),
    ("UTF-16 body", "POST", "/v1/crashes", {"content": '{"sku": "g"}'.encode("utf-16"), "headers": JSON}, 400,
     "invalid_json"),
    ("number beyond a float", "POST", "/v1/crashes", {"content": b'{"sku": "g", "x": 1e400}', "headers": JSON},
     400, "invalid_field"),
    ("not JSON media type", "POST", "/v1/crashes", {"content": b"{}", "headers": {"content-type": "text/plain"}},
     415, "unsupported_media_type"),
    ("no media type", "POST", "/v1/crashes", {"content": b'{"sku": "g"}'}, 415, "unsupported_media_type"),
    ("no media type for scores", "POST", "/v1/scores", {"content": b'{"board": "b", "playerId": "p", "score": 1}'},
     415, "unsupported_media_type"),
    ("no media type for a board", "PUT", "/v1/leaderboards/b", {"content": b'{"order": "asc"}'}, 415,
     "unsupported_media_type"),
    ("a form post", "POST", "/v1/sessions", {"data": {"sku": "g", "kind": "client"}}, 415, "unsupported_media_type"),
    # found from outside: API Gateway's `headers` keeps a header's last line, so a coding stacked on
    # another line was not seen
    ("Content-Encoding on two lines", "POST", "/v1/crashes",
     {"content": b'{"sku": "g"}', "headers": [("content-type", "application/json"), ("content-encoding", "gzip"),
                                               ("content-encoding", "identity")]}, 415, "unsupported_media_type"),
    ("bad session kind", "POST", "/v1/sessions", {"json": [{"sku": "g", "kind": "client"}, {"sku": "g", "kind": "x"}]},
     400, "invalid_field"),
    ("too many sessions", "POST", "/v1/sessions", {"json": [{"sku": "g", "kind": "client"}] * 501}, 400,
     "invalid_field"),
    ("too many scores", "POST", "/v1/scores", {"json": [{"board": "b", "playerId": "p", "score": 1}] * 501}, 400,
     "invalid_field"),
    ("float score", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "p", "score": 1.5}}, 400,
     "invalid_field"),
    # 1e3 is 1000, as JSON Schema's integer has it; a float from 2**53 is no longer the number meant
    ("score past a double's integers", "POST", "/v1/scores",
     {"content": b'{"board": "b", "playerId": "p", "score": 9007199254740993.0}', "headers": JSON}, 400,
     "invalid_field"),
    ("string score", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "p", "score": "12"}}, 400,
     "invalid_field"),
    ("score over int64", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "p", "score": 2**63}}, 400,
     "invalid_field"),
    ("score under int64", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "p", "score": -(2**63) - 1}},
     400, "invalid_field"),
    ("bool score", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "p", "score": True}}, 400,
     "invalid_field"),
    ("player id with a slash", "POST", "/v1/scores", {"json": {"board": "b", "playerId": "a/b", "score": 1}}, 400,
     "invalid_field"),
    ("player id with a quote", "POST", "/v1/scores", {"json": {"board": "b", "playerId": 'a"b', "score": 1}}, 400,
     "invalid_field"),
    ("sql in board", "POST", "/v1/scores", {"json": {"board": SQL, "playerId": "p", "score": 1}}, 400,
     "invalid_field"),
    # found from outside: taken, and a URL client resolves the name as a relative segment: never asked for
    ("board named ..", "POST", "/v1/scores", {"json": {"board": "..", "playerId": "p", "score": 1}}, 400,
     "invalid_field"),
    ("board named .", "PUT", "/v1/leaderboards/%2E", {"json": {"order": "asc"}}, 400, "invalid_field"),
    ("bad board settings", "PUT", "/v1/leaderboards/b", {"json": {"order": "sideways", "operator": "best"}}, 400,
     "invalid_field"),
    ("window ending before it starts", "PUT", "/v1/leaderboards/b",
     {"json": {"startsAt": "2026-01-02T00:00:00Z", "endsAt": "2026-01-01T00:00:00Z"}}, 400, "invalid_field"),
    ("window time not a time", "PUT", "/v1/leaderboards/b", {"json": {"endsAt": "tomorrow"}}, 400, "invalid_field"),
    ("no attempts", "PUT", "/v1/leaderboards/b", {"json": {"maxAttempts": 0}}, 400, "invalid_field"),
    ("players past their bound", "PUT", "/v1/leaderboards/b", {"json": {"maxPlayers": 2**31}}, 400,
     "invalid_field"),
    ("attempt with a board", "POST", "/v1/leaderboards/b/attempts",
     {"json": {"board": "b", "playerId": "p", "score": 1}}, 400, "invalid_field"),
    ("attempt score over int64", "POST", "/v1/leaderboards/b/attempts", {"json": {"playerId": "p", "score": 2**63}},
     400, "invalid_field"),
    ("a batch of attempts", "POST", "/v1/leaderboards/b/attempts", {"json": [{"playerId": "p", "score": 1}] * 2},
     400, "invalid_field"),
    ("attempt at no board", "POST", "/v1/leaderboards/nowhere/attempts", {"json": {"playerId": "p", "score": 1}},
     404, "not_found"),
    ("unknown route", "GET", "/v1/nothing", {}, 404, "not_found"),
    ("traversal route", "GET", "/v1/crashes/1/attachments/..%2F..%2Fetc%2Fpasswd", {}, 404, "not_found"),
    ("unknown report", "GET", "/v1/crashes/999999", {}, 404, "not_found"),
    ("report id not a number", "GET", "/v1/crashes/1%20OR%201=1", {}, 404, "not_found"),
    ("report id over 64 bits", "GET", "/v1/crashes/99999999999999999999999/attachments/a.png", {}, 404, "not_found"),
    ("report id a superscript digit", "GET", "/v1/crashes/%C2%B2", {}, 404, "not_found"),
    ("bad limit", "GET", "/v1/crashes?sku=g&limit=0", {}, 400, "invalid_field"),
    ("time a superscript digit", "GET", "/v1/stats?sku=g&from=%C2%B9", {}, 400, "invalid_field"),
    ("time beyond int64", "GET", "/v1/crashes?sku=g&from=99999999999999999999999", {}, 400, "invalid_field"),
    ("cursor a superscript digit", "GET", "/v1/crashes?sku=g&cursor=csKy", {}, 400, "invalid_field"),
    ("cursor beyond int64", "GET", "/v1/crashes?sku=g&cursor=cjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk", {}, 400,
     "invalid_field"),
    ("sql limit", "GET", f"/v1/crashes?sku=g&limit={SQL}", {}, 400, "invalid_field"),
    ("bad time", "GET", "/v1/stats?sku=g&from=yesterday", {}, 400, "invalid_field"),
    ("bad cursor", "GET", "/v1/crashes?sku=g&cursor=%00%01", {}, 400, "invalid_field"),
    ("bad granularity", "GET", "/v1/stats?sku=g&granularity=second", {}, 400, "invalid_field"),
    ("sql as the sku asked for", "GET", "/v1/crash-groups", {"params": {"sku": SQL}}, 400, "invalid_field"),
    ("bad release interval", "GET", "/v1/releases/1.0?sku=g&interval=week", {}, 400, "invalid_field"),
    ("release window over 90 days", "GET", "/v1/releases/1.0?sku=g&from=0&to=7776000001", {}, 400,
     "invalid_field"),
    ("release window backwards", "GET", "/v1/releases/1.0?sku=g&from=2000&to=1000", {}, 400, "invalid_field"),
    ("too many builds asked for", "GET", "/v1/releases?sku=g&limit=101", {}, 400, "invalid_field"),
    ("another listing's cursor for builds", "GET", "/v1/releases?sku=g&cursor=c3g", {}, 400, "invalid_field"),
    # found from outside: more digits than int() converts (4,300) was a 500
    ("a build cursor of 5,000 digits", "GET", "/v1/releases",
     {"params": {"sku": "g", "cursor": encode_cursor(of_scope(Kind.BUILDS, "g"), "9" * 5000 + ":b")}}, 400,
     "invalid_field"),
    ("an alert cursor of 5,000 digits", "GET", "/v1/alerts/history",
     {"params": {"sku": "g", "cursor": encode_cursor(of_scope(Kind.ALERTS, "g"), "9" * 5000 + ":k")}}, 400,
     "invalid_field"),
    ("release of no sku", "GET", "/v1/releases/1.0", {}, 400, "missing_field"),
    ("unknown build", "GET", "/v1/releases/no-such-build?sku=g", {}, 404, "not_found"),
    ("session status unknown", "POST", "/v1/sessions", {"json": {"sku": "g", "kind": "client", "status": "exited"}},
     400, "invalid_field"),
    ("session build with a slash", "POST", "/v1/sessions",
     {"json": {"sku": "g", "kind": "client", "buildVersion": "1/2"}}, 400, "invalid_field"),
    ("signature not a digest", "GET", "/v1/crash-groups/DrawMesh()?sku=g", {}, 400, "invalid_field"),
    # an encoded slash stays in its segment, as API Gateway keeps it: a signature of no hex digits
    ("signature a traversal", "GET", "/v1/crash-groups/..%2Fetc?sku=g", {}, 400, "invalid_field"),
    ("unknown crash group", "GET", "/v1/crash-groups/00000000000000ff?sku=g", {}, 404, "not_found"),
    ("crash group of no sku", "GET", "/v1/crash-groups/00000000000000ff", {}, 400, "missing_field"),
    ("state regressed is the consumer's", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "regressed"}}, 400, "invalid_field"),
    ("a build to an ignore", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "ignored", "inBuild": "2"}}, 400, "invalid_field"),
    ("ignore until no time", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "ignored", "ignoreUntil": "soon"}}, 400, "invalid_field"),
    ("state of an unknown group", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "resolved"}}, 404, "not_found"),
    # found from outside: a count written as JSON writes a whole number was 400, as a board's were
    ("ignore for 7.0 reports", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "ignored", "ignoreForReports": 7.0}}, 404, "not_found"),
    ("merge into itself", "POST", "/v1/crash-groups/00000000000000ff/merge?sku=g",
     {"json": {"into": "00000000000000ff"}}, 400, "invalid_field"),
    ("merge of an unknown group", "POST", "/v1/crash-groups/00000000000000ff/merge?sku=g",
     {"json": {"into": "00000000000000aa"}}, 404, "not_found"),
    ("merge into no digest", "POST", "/v1/crash-groups/00000000000000ff/merge?sku=g",
     {"json": {"into": "Renderer::DrawMesh"}}, 400, "invalid_field"),
    ("merge of no sku", "POST", "/v1/crash-groups/00000000000000ff/merge",
     {"json": {"into": "00000000000000aa"}}, 400, "missing_field"),
    ("grouping rules a regex field", "PUT", "/v1/crash-groups:rules?sku=g", {"json": {"regex": ["(a+)+$"]}}, 400,
     "invalid_field"),
    ("too many grouping rules", "PUT", "/v1/crash-groups:rules?sku=g", {"json": {"skip": ["in a*"] * 51}}, 400,
     "invalid_field"),
    ("a grouping rule too long", "PUT", "/v1/crash-groups:rules?sku=g", {"json": {"join": ["*" * 201]}}, 400,
     "invalid_field"),
    ("a grouping rule with a line break", "PUT", "/v1/crash-groups:rules?sku=g", {"json": {"skip": ["a\nb"]}}, 400,
     "invalid_field"),
    ("grouping rules of no sku", "GET", "/v1/crash-groups:rules", {}, 400, "missing_field"),
    ("reprocessing of no sku", "POST", "/v1/crash-groups:reprocess", {}, 400, "missing_field"),
    ("webhook to a file", "PUT", "/v1/webhooks/w",
     {"json": {"url": "file:///etc/passwd", "secret": "0123456789abcdef", "alerts": ["regressed"]}}, 400,
     "invalid_field"),
    ("webhook to loopback", "PUT", "/v1/webhooks/w",
     {"json": {"url": "http://127.0.0.1:8080/v1/health", "secret": "0123456789abcdef", "alerts": ["regressed"]}},
     400, "invalid_field"),
    ("webhook to the metadata service", "PUT", "/v1/webhooks/w",
     {"json": {"url": "http://169.254.169.254/latest/", "secret": "0123456789abcdef", "alerts": ["regressed"]}},
     400, "invalid_field"),
    ("webhook to localhost by name", "PUT", "/v1/webhooks/w",
     {"json": {"url": "http://localhost:8080/", "secret": "0123456789abcdef", "alerts": ["regressed"]}},
     400, "invalid_field"),
    # found from outside: taken at registration; the first never sent, the second stopped each delivery run
    ("webhook to loopback as a number", "PUT", "/v1/webhooks/w",
     {"json": {"url": "http://2130706433/", "secret": "0123456789abcdef", "alerts": ["regressed"]}},
     400, "invalid_field"),
    ("webhook to a host no name can be", "PUT", "/v1/webhooks/w",
     {"json": {"url": "http://a..com/hook", "secret": "0123456789abcdef", "alerts": ["regressed"]}},
     400, "invalid_field"),
    ("webhook named ..", "PUT", "/v1/webhooks/%2E%2E",
     {"json": {"url": "https://hooks.example.com/x", "secret": "0123456789abcdef", "alerts": ["regressed"]}}, 400,
     "invalid_field"),
    ("webhook secret too short", "PUT", "/v1/webhooks/w",
     {"json": {"url": "https://hooks.example.com/x", "secret": "short", "alerts": ["regressed"]}}, 400,
     "invalid_field"),
    ("webhook of an unknown alert", "PUT", "/v1/webhooks/w",
     {"json": {"url": "https://hooks.example.com/x", "secret": "0123456789abcdef", "alerts": ["spike"]}}, 400,
     "invalid_field"),
    ("deliveries of no webhook", "GET", "/v1/webhooks/nobody/deliveries", {}, 404, "not_found"),
    ("delete no webhook", "DELETE", "/v1/webhooks/nobody", {}, 404, "not_found"),
    ("alert history of no sku", "GET", "/v1/alerts/history", {}, 400, "missing_field"),
    ("too many alerts asked for", "GET", "/v1/alerts/history?sku=g&limit=101", {}, 400, "invalid_field"),
    ("alert history backwards", "GET", "/v1/alerts/history?sku=g&from=2000&to=1000", {}, 400, "invalid_field"),
    ("another listing's cursor for alerts", "GET", "/v1/alerts/history?sku=g&cursor=c3g", {}, 400,
     "invalid_field"),
    # "h²:k" and "h99999999999999999999:k", as the history's cursors are written
    ("alert cursor a superscript digit", "GET", "/v1/alerts/history?sku=g&cursor=aMKyOms", {}, 400,
     "invalid_field"),
    ("alert cursor beyond int64", "GET", "/v1/alerts/history?sku=g&cursor=aDk5OTk5OTk5OTk5OTk5OTk5OTk5Omtz",
     {}, 400, "invalid_field"),
    ("idempotency key too long", "POST", "/v1/sessions",
     {"json": {"sku": "g", "kind": "client"}, "headers": {"Idempotency-Key": "k" * 257}}, 400, "invalid_field"),
    # the other routes the contract says take one (tests/unit/test_contract_drift.py)
    ("attempt's idempotency key too long", "POST", "/v1/leaderboards/b/attempts",
     {"json": {"playerId": "p", "score": 1}, "headers": {"Idempotency-Key": "k" * 257}}, 400, "invalid_field"),
    ("deletion's idempotency key too long", "DELETE", "/v1/leaderboards/b/players/p",
     {"headers": {"Idempotency-Key": "k" * 257}}, 400, "invalid_field"),
    # found from outside: the last of two keys was taken, so a retry sending both was another attempt
    ("Idempotency-Key given twice", "POST", "/v1/leaderboards/b/attempts",
     {"json": {"playerId": "p", "score": 1}, "headers": [("Idempotency-Key", "k1"), ("Idempotency-Key", "k2")]}, 400,
     "invalid_field"),
    ("Idempotency-Key given twice to capture", "POST", "/v1/sessions",
     {"json": {"sku": "g", "kind": "client"}, "headers": [("Idempotency-Key", "k1"), ("idempotency-key", "k1")]},
     400, "invalid_field"),
    # found from outside: a misspelt parameter of a write went unread, and the write went ahead
    ("a parameter a deletion does not take", "DELETE", "/v1/leaderboards/b/players/p?seasn=1970-01-02T00:00:00Z",
     {}, 400, "invalid_field"),
    ("a parameter a ban does not take", "PUT", "/v1/bans/p?board=b", {}, 400, "invalid_field"),
    # found by schemathesis: $ matched before a final newline, so this reached the boards' listing
    ("a board named a newline", "GET", "/v1/leaderboards/%0A?season=1", {}, 404, "not_found"),
    ("a crash group named a newline", "GET", "/v1/crash-groups/%0A?sku=g", {}, 400, "invalid_field"),
    # found from outside: a name past what a file name holds was 500, on upload and on delete
    ("a symbol file's debug file too long for a file name", "POST", "/v1/symbols",
     {"content": b"MODULE Linux x86_64 3C597FD17C0A1BC0B2A03B414F0E44180 " + b"d" * 252,
      "headers": {"Content-Type": "application/octet-stream"}}, 400, "invalid_field"),
    ("a symbol file named past what a file name holds", "DELETE",
     "/v1/symbols/" + "d" * 252 + "/3C597FD17C0A1BC0B2A03B414F0E44180", {}, 404, "not_found"),
    # found from outside: a time within the years 1 to 9999 as written, but not in UTC, was 500; a
    # write stored it first, and every read of it answered 500 after
    ("a time past the year 9999 in UTC", "GET", "/v1/stats?sku=g&from=9999-12-31T23:00:00-01:00"
     "&to=9999-12-31T23:59:00-01:00", {}, 400, "invalid_field"),
    ("a time before the year 1 in UTC", "GET", "/v1/releases/1.0?sku=g&to=0001-01-01T00:30:00%2B01:00", {}, 400,
     "invalid_field"),
    # found from outside: taken, and the group showed ignored until its next report ended it
    ("ignore until a time gone by", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "ignored", "ignoreUntil": "2000-01-01T00:00:00Z"}}, 400, "invalid_field"),
    ("ignore until past the year 9999 in UTC", "PUT", "/v1/crash-groups/00000000000000ff/state?sku=g",
     {"json": {"state": "ignored", "ignoreUntil": "9999-12-31T23:59:59-01:00"}}, 400, "invalid_field"),
    ("a board ending past the year 9999 in UTC", "PUT", "/v1/leaderboards/b",
     {"json": {"endsAt": "9999-12-31T23:59:59-01:00"}}, 400, "invalid_field"),
]


@pytest.mark.parametrize(("case", "method", "path", "kwargs", "status", "code"), BAD_REQUESTS,
                         ids=[c[0] for c in BAD_REQUESTS])
def test_bad_input_gets_the_contract_error_and_the_server_keeps_serving(serve: Serve, case, method, path, kwargs,
                                                                        status, code):
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        response = client.request(method, path, **kwargs)
        assert response.status_code == status, response.text
        assert response.json()["error"] == code and response.json()["message"]
        assert client.get("/v1/health").status_code == 200


def test_hostile_but_valid_values_are_data_stored_and_returned_exactly(serve: Serve):
    sku = "hostile:pc"
    report = {"sku": sku, "crashType": HOSTILE[:250], "errorCode": SQL, "platform": "ps5' --", "buildVersion": SQL,
              "playerId": "p'; --🔥", "sessionId": "s\x00\x01", "clientTime": SQL, "stackTrace": HOSTILE * 3,
              SQL: HOSTILE, "nested": {"🔥": [HOSTILE, None, 1.5, -0.0, 1e308]},
              "attachments": {"screen shot (1) é.png": base64.b64encode(HOSTILE.encode()).decode()}}
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert client.post("/v1/crashes", json=report).status_code == 202
        assert client.post("/v1/sessions", json={"sku": sku, "kind": "client", "playerId": SQL[:120]}).status_code \
            == 202
        assert client.post("/v1/scores", json={"board": "hostile", "playerId": PLAYER, "score": -(2**63)}) \
            .status_code == 202
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = client.get("/v1/crashes", params={"sku": sku, "fields": "full", "errorCode": SQL}).json()
            player = client.get(f"/v1/leaderboards/hostile/players/{quote(PLAYER, safe='')}")
            if found["reports"] and player.status_code == 200:
                break
            time.sleep(0.2)
        [stored] = found["reports"]
        assert stored["payload"] == report and stored["crashType"] == HOSTILE[:250]
        name = "screen shot (1) é.png"
        attachment = client.get(f"/v1/crashes/{stored['reportId']}/attachments/{name}")
        assert attachment.content == HOSTILE.encode()
        assert player.json() == {"playerId": PLAYER, "score": -(2**63), "rank": 1, "metadata": None}
        assert client.get("/v1/crashes", params={"sku": sku, "platform": SQL}).json()["reports"] == []


async def _post_mixed(base_url: str) -> list[tuple[str, httpx.Response]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        async def send(kind: str, path: str, **kwargs: Any) -> tuple[str, httpx.Response]:
            return kind, await client.post(path, **kwargs)

        requests = []
        for n in range(60):
            requests.append(send("crash", "/v1/crashes", json={"sku": "mixed:pc", "n": n}))
            requests.append(send("bad", "/v1/crashes", content=b'{"sku": "mixed:pc", "n": ', headers=JSON))
            requests.append(send("bad", "/v1/crashes", json={"sku": "mixed:pc", "attachments": {"../x": "aGk="}}))
            requests.append(send("session", "/v1/sessions", json=[{"sku": "mixed:pc", "kind": "server"}] * 5))
            requests.append(send("bad", "/v1/sessions", json=[{"sku": "mixed:pc", "kind": "server"}, {"sku": 1}]))
            requests.append(send("score", "/v1/scores", json={"board": "mixed", "playerId": f"p{n}", "score": n}))
            requests.append(send("bad", "/v1/scores", json={"board": "mixed", "playerId": "p", "score": 0.5}))
        return list(await asyncio.gather(*requests))


def test_nothing_valid_sent_alongside_bad_input_is_lost(serve: Serve):
    answers = asyncio.run(_post_mixed(serve.url))
    statuses = Counter((kind, r.status_code) for kind, r in answers)
    assert statuses == {("crash", 202): 60, ("session", 202): 60, ("score", 202): 60, ("bad", 400): 240}, statuses
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            crashes = client.get("/v1/crashes", params={"sku": "mixed:pc", "limit": 1000}).json()["reports"]
            sessions = sum(b["sessions"] for b in client.get("/v1/stats", params={"sku": "mixed:pc"}).json()["series"])
            board = client.get("/v1/leaderboards/mixed")
            if len(crashes) == 60 and sessions == 300 and board.status_code == 200 and board.json()["players"] == 60:
                break
            time.sleep(0.2)
        assert (len(crashes), sessions, board.json()["players"]) == (60, 300, 60)
        assert sorted(json.loads(json.dumps(r["eventId"])) for r in crashes) == sorted({r["eventId"] for r in crashes})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
# bodies that are close to valid, so the fuzzer gets past the first check
near_valid = st.fixed_dictionaries({"sku": st.text(max_size=70) | st.just("fuzz:pc")}, optional={
    "kind": st.sampled_from(["client", "server", "x"]), "board": st.text(max_size=20), "playerId": json_values,
    "score": json_values, "attachments": st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=2),
    "stackTrace": json_values, "crashType": json_values,
})
ROUTES = [(r.method, r.path) for r in API_ROUTES]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), body=json_values | near_valid | st.lists(near_valid, max_size=3),
       raw=st.binary(max_size=64), use_raw=st.booleans(),
       params=st.dictionaries(st.sampled_from(["sku", "from", "to", "limit", "offset", "cursor", "fields", "score",
                                               "radius", "granularity", "signature", "interval"]),
                              st.text(max_size=30), max_size=4),
       segment=st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s and s not in (".", "..")))
def test_fuzzing_never_gets_a_server_error(serve: Serve, route, body, raw, use_raw, params, segment):
    method, template = route
    segment = quote(segment, safe="")
    path = template.format(reportId=segment, name=segment, board=segment, playerId=segment, projectId=segment,
                           key=segment, debugFile=segment, debugId=segment, build=segment,
                           signature=segment)
    content = raw if use_raw else json.dumps(body).encode()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        response = client.request(method, path, params=params, content=content if method != "GET" else None,
                                  headers=JSON)
    assert response.status_code < 500, (method, path, response.text)
    if response.status_code >= 400:
        error = response.json()
        assert set(error) <= {"error", "message", "field"} and error["error"] and error["message"]
