"""The project's OpenAPI document (api/openapi.yaml, generated from the handlers) against `blackbox
serve` with keys: schemathesis generates requests for every operation from the document, valid and
not, and checks each answer: never a 5xx, a status code the document lists, its content type, a
body its schema allows, that what breaks the document (a missing key too) is refused, and that
what keeps to it is accepted (so the document promises nothing the server refuses)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, assume, settings
from schemathesis import checks
from schemathesis.generation.case import Case

from api.access import API_KEY_HEADER, Role
from crashes.spikes import MAX_MINUTES
from crashes.stats import MAX_BUCKETS
from lambdas.functions import API_ROUTES
from local_runtime.process import Serve
from ports.timeutil import now_ms, parse_epoch_ms
from tests.e2e.conftest import put_project, running

DOCUMENT = Path(__file__).resolve().parents[2] / "api" / "openapi.yaml"
schema = schemathesis.openapi.from_path(DOCUMENT)
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance, checks.negative_data_rejection, checks.positive_data_acceptance]
KEYS = {Role.INGEST: "ingest-Op3n", Role.SERVER: "server-Ap1s", Role.READ: "read-D0cs"}
# the project a native reporter's upload names. An envelope's, a minidump's or an Unreal
# container's framing is prose to a schema (a binary body), which can say neither what is valid nor
# what is not: those routes are held to the checks but those two (tests/e2e/test_sentry.py,
# test_native_uploads.py and their unit tests say the rest); so is a Breakpad symbol file's
# (test_minidump_processing.py), and a board's reset schedule, a cron expression (its grammar and
# calendar, such as no 30 February, are prose to a schema: ranking.seasons and its tests)
PROJECT = 1
SENTRY_AUTH = "X-Sentry-Auth"
FRAMED_IN_PROSE = CHECKS[:-2]


@schemathesis.serializer("application/x-sentry-envelope")
def _envelope(_: Any, value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()
ROLES = {(r.method, r.path): r.roles for r in API_ROUTES}
NATIVE = {(r.method, r.path) for r in API_ROUTES if r.credential != "api-key"}
# also prose: which fields of a crash group's state go with which state, that a group is merged into
# another, and whether a webhook's host is a public address (tests/e2e/test_bad_input.py holds them)
PROSE = NATIVE | {("POST", "/v1/symbols"), ("PUT", "/v1/leaderboards/{board}"),
                  ("PUT", "/v1/crash-groups/{signature}/state"), ("POST", "/v1/crash-groups/{signature}/merge"),
                  ("PUT", "/v1/webhooks/{name}")}


@pytest.fixture(scope="module", params=["embedded", "services"])
def keyed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    env = {f"BLACKBOX_API_KEYS__{role.value.upper()}": json.dumps([key]) for role, key in KEYS.items()}
    with running(request.param, tmp_path_factory.mktemp(f"openapi-{request.param}"), env) as server:
        put_project(server, PROJECT, "openapi:pc", KEYS[Role.SERVER])
        yield server


def test_the_document_has_exactly_the_routes():
    paths = yaml.safe_load(DOCUMENT.read_text())["paths"]
    documented = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert documented == {(r.method, r.path) for r in API_ROUTES}


# the longest range every route with one takes (a week of minutes); how long is prose, not schema
LONGEST_RANGE_MS = min(MAX_BUCKETS, MAX_MINUTES) * 60_000


def within_the_prose(query: dict[str, Any]) -> None:
    """What a schema cannot say of valid data, said here: a cursor is one a page gave out (a made-up
    one is refused), and a time range ends after it starts (to defaults to now) and spans at most a
    week. A range that breaks that is left out; a value the document refuses is kept, refused."""
    query.pop("cursor", None)
    if "from" not in query:  # the route's default range
        return
    try:
        start = parse_epoch_ms(str(query["from"]))
        end = parse_epoch_ms(str(query["to"])) if "to" in query else now_ms()
    except ValueError:
        return
    if not 0 < end - start <= LONGEST_RANGE_MS:
        query.pop("from", None)
        query.pop("to", None)


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_serve_keeps_to_the_document(keyed: Serve, case: Case):
    # the generated key stands for a good one; a case without one checks that it is refused
    if case.headers and API_KEY_HEADER in case.headers:
        roles = ROLES[case.operation.method.upper(), case.operation.path] or frozenset(KEYS)
        case.headers[API_KEY_HEADER] = KEYS[min(roles, key=list(KEYS).index)]
    if case.headers and SENTRY_AUTH in case.headers:
        case.headers[SENTRY_AUTH] = f"Sentry sentry_key={KEYS[Role.INGEST]}, sentry_version=7"
    if case.query and "sentry_key" in case.query:
        case.query["sentry_key"] = KEYS[Role.INGEST]
    if case.meta is not None and case.meta.generation.mode.is_positive and case.query:
        within_the_prose(case.query)
    if case.path_parameters:
        # schemathesis quotes a path parameter as generated once it unquoted it (quote_all): a player
        # id `%ff`, which the document allows, goes as U+FFFD, which it does not. Such a case is
        # dropped; escaping each `%` instead quoted the quoted value again, and an invalid id went
        # as a valid one
        assume(not any(type(value) is str and "\ufffd" in unquote(value) for value in case.path_parameters.values()))
    native = (case.operation.method.upper(), case.operation.path) in NATIVE
    if native and case.path_parameters and case.path_parameters.get("projectId", "").isdigit():
        case.path_parameters["projectId"] = str(PROJECT)  # a known project: the upload is read
    prose = (case.operation.method.upper(), case.operation.path) in PROSE
    case.call_and_validate(base_url=keyed.url, checks=FRAMED_IN_PROSE if prose else CHECKS, timeout=30)
