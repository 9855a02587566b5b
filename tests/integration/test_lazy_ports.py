"""Each function builds only the ports it uses, on first use: what it declares (and is granted in
AWS) is exactly what its handler reaches, and a store it does not use cannot fail it."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adapters.factory import build, install
from adapters.settings import Settings
from lambdas import capture
from lambdas.functions import FUNCTION_PORTS, FUNCTIONS, load_handler
from local_runtime.context import LocalContext
from tests.conftest import EVENTS, load_event
from tests.services import namespace, settings


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_function_builds_exactly_the_ports_it_declares(function: str, tmp_path: Path):
    """Its sample events between them reach every port it declares, and no other: a port missing
    from the list would be refused by its role in AWS, one too many granted for nothing."""
    adapters = build(Settings(data_dir=tmp_path))
    install(adapters)
    try:
        assert adapters.built == []
        if function == "native":  # an upload names a project: without one it goes no further
            load_handler("projects")(load_event("projects-put.json"), LocalContext("projects"))
        for sample in sorted(EVENTS.glob(f"{function}*.json")):
            load_handler(function)(load_event(sample.name), LocalContext(function))
        assert set(adapters.built) == FUNCTION_PORTS[function]
    finally:
        install(None)
        adapters.close()


@pytest.mark.services
def test_capture_answers_202_while_couchbase_and_mysql_are_away(tmp_path: Path):
    """Capture used to build every port at its first request, so a document store or database
    outage made it answer 500 instead of taking the event."""
    away = settings(couchbase_url="couchbase://127.0.0.1:1", mysql_url="mysql://blackbox:blackbox@127.0.0.1:1/blackbox",
                    kafka_topic_prefix=f"{namespace()}.", data_dir=str(tmp_path))
    adapters = build(away)
    install(adapters)
    try:
        response = capture.handler(load_event("capture-crash.json"), LocalContext("capture"))
        assert response["statusCode"] == 202, response
        assert set(json.loads(response["body"])) == {"eventId", "reportKey"}
        assert adapters.built == ["log", "spill"]
        assert adapters.spill.list(10) == []  # Kafka took it
    finally:
        install(None)
        adapters.close()


def test_what_the_hot_paths_keep_of_the_stores_is_one_a_process(tmp_path: Path):
    """A crash consumer's groupings and a native upload's project skus outlive an invocation, read
    again once stale: handler threads asking at once share one of each, built on first use."""
    adapters = build(Settings(data_dir=tmp_path))
    try:
        with ThreadPoolExecutor(8) as pool:
            found = list(pool.map(lambda _: (adapters.groupings, adapters.project_skus), range(32)))
        assert len({id(g) for g, _ in found}) == len({id(s) for _, s in found}) == 1
        assert set(adapters.built) == {"issues", "projects"}
    finally:
        adapters.close()
