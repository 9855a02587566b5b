"""Per-title ingest keys: a title's key posts only its own skus, whether the key id comes from API
Gateway (with BLACKBOX_KEY_SKUS from the deployment) or from the local gateway's title keys."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.factory import Adapters
from adapters.settings import Settings
from api.access import SERVER, WRITERS, ApiKeys, Caller, Role
from lambdas import capture
from local_runtime.context import LocalContext
from pipeline.topics import SESSIONS
from ports.errors import Forbidden, Unauthorized
from ports.scopes import SkuScope
from tests.conftest import load_event


def test_local_keys_take_title_keys_beside_plain_ones(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BLACKBOX_API_KEYS__INGEST", json.dumps(
        ["plain-key", {"key": "skyrift-key", "skus": ["skyrift:pc", "skyrift:ps5"]}]))
    monkeypatch.setenv("BLACKBOX_API_KEYS__SERVER", '["server-key"]')
    keys = Settings().api_keys
    assert keys.identify("plain-key") == Caller(Role.INGEST, "ingest-0")
    assert keys.identify("skyrift-key") == Caller(Role.INGEST, "ingest-1")
    assert keys.identify("server-key") == Caller(Role.SERVER, "server-0")
    assert keys.identify("skyrift-key ") is None and keys.identify(None) is None
    assert keys.key_skus == {"ingest-1": ["skyrift:pc", "skyrift:ps5"]}
    # the caller, for the local gateway to name the key to the handler as API Gateway does
    assert keys.authorize("skyrift-key", WRITERS, "POST /v1/crashes") == Caller(Role.INGEST, "ingest-1")
    with pytest.raises(Forbidden):
        keys.authorize("skyrift-key", SERVER, "POST /v1/scores")


def test_a_key_that_is_none_of_the_servers_is_told_so_not_asked_for(monkeypatch: pytest.MonkeyPatch):
    """Found by a newcomer: a wrong key was told the route "needs an API key", as no key is."""
    monkeypatch.setenv("BLACKBOX_API_KEYS__INGEST", '["plain-key"]')
    keys = Settings().api_keys
    with pytest.raises(Unauthorized, match=r"^POST /v1/crashes needs an API key in the x-api-key header$"):
        keys.authorize(None, WRITERS, "POST /v1/crashes")
    with pytest.raises(Unauthorized, match=r"^the key in the x-api-key header is none of this server's keys$"):
        keys.authorize("plain-kay", WRITERS, "POST /v1/crashes")


@pytest.mark.parametrize("entry", [{"key": "k", "skus": []}, {"key": "k", "skus": ["not a sku"]},
                                   {"key": "", "skus": ["a"]}, {"key": "k", "skus": ["a"], "role": "server"}])
def test_a_title_key_needs_a_key_and_valid_skus(entry: dict[str, Any]):
    with pytest.raises(ValidationError):
        ApiKeys(ingest=[entry])


def test_a_scope_lets_a_title_key_post_its_own_skus_and_any_other_key_any():
    scopes = {"k-title": ["skyrift:pc", "skyrift:ps5"]}
    SkuScope.of("k-title", scopes).check(["skyrift:pc", "skyrift:ps5", "skyrift:pc"])
    SkuScope.of("k-other", scopes).check(["anything:else"])
    SkuScope.of(None, scopes).check(["anything:else"])
    with pytest.raises(Forbidden, match="may not post sku ember:pc"):
        SkuScope.of("k-title", scopes).check(["skyrift:pc", "ember:pc"])


def with_key(name: str, key_id: str | None, body: Any = None) -> dict[str, Any]:
    """A sample capture event as API Gateway sends it for a request with the key `key_id`."""
    event = load_event(name)
    event["requestContext"]["identity"]["apiKeyId"] = key_id
    if body is not None:
        event["body"] = json.dumps(body)
    return capture.handler(event, LocalContext("capture"))


def test_in_aws_capture_refuses_a_title_key_another_titles_sku(adapters: Adapters, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(adapters.settings, "key_skus", {"key-skyrift": ["skyrift:pc"], "key-ember": ["ember:pc"]})
    # the samples post skyrift:pc
    assert with_key("capture-crash.json", "key-skyrift")["statusCode"] == 202
    assert with_key("capture-sessions.json", "key-skyrift")["statusCode"] == 202
    refused = with_key("capture-crash.json", "key-ember")
    assert (refused["statusCode"], json.loads(refused["body"])["error"]) == (403, "forbidden")
    # one foreign sku refuses the whole batch, and nothing of it is published
    published = sum(adapters.log.end_offsets(SESSIONS).values())
    batch = [{"sku": "ember:pc", "kind": "client"}, {"sku": "skyrift:pc", "kind": "client"}]
    assert with_key("capture-sessions.json", "key-ember", batch)["statusCode"] == 403
    assert sum(adapters.log.end_offsets(SESSIONS).values()) == published
    # a key that is no title's (a server key, the shared ingest key) posts any sku
    assert with_key("capture-crash.json", "key-server")["statusCode"] == 202


@pytest.mark.parametrize(("function", "sample", "changes", "field", "words"), [
    ("reporter", "reporter-list-crashes.json",
     {"queryStringParameters": {"sku": "sky rift"}, "multiValueQueryStringParameters": {"sku": ["sky rift"]}},
     "sku", "1 to 64 of A-Z a-z 0-9 . _ : -, e.g. skyrift:pc"),
    ("leaderboards", "leaderboards-put-board.json", {"path": "/v1/leaderboards/time trial"},
     "board", "1 to 128 of A-Z a-z 0-9 . _ : - (not . or ..)"),
])
def test_a_query_or_path_name_refused_says_what_a_name_is_not_a_regex(adapters: Adapters, function: str, sample: str,
                                                                      changes: dict[str, Any], field: str, words: str):
    """Found in review: a query's sku and a path's board name were still told the pattern."""
    handler = importlib.import_module(f"lambdas.{function}").handler
    answer = json.loads(handler(load_event(sample) | changes, LocalContext(function))["body"])
    assert (answer["field"], answer["message"]) == (field, f"{field}: {words}")
