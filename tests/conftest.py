from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import settings as hypothesis_settings
from moto import mock_aws

from adapters.factory import Adapters, build, install
from adapters.settings import Settings
from local_runtime.context import LocalContext
from tests.services import RUN_ENV, drop_what_the_run_made_on_kafka, run_prefix

EVENTS = Path(__file__).resolve().parent.parent / "events"

# hypothesis's 200 ms deadline is a timing asserted in a test: on a busy 2-core CI machine an
# example of a fast test took 270 ms, and failed it
hypothesis_settings.register_profile("blackbox", deadline=None)
hypothesis_settings.load_profile("blackbox")
# fixtures only `make test` provides: Chromium for the dashboard's tests (scripts/services installs
# it), the stack walker for the minidumps' (built from stackwalk/ with cargo)
ENGINE_FIXTURES = {"browser", "walker"}


# whether this process made the run's mark: xdist's workers, and a pytest run inside a test (one
# collects), take it from the environment, and must not drop what the run still uses
_MARKED_HERE = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_MARKED_HERE] = RUN_ENV not in os.environ
    run_prefix()  # set before xdist starts its workers


@pytest.hookimpl(trylast=True)  # after the session's fixtures (its serves) are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.stash.get(_MARKED_HERE, False):  # once every worker is done
        drop_what_the_run_made_on_kafka()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `services` every test that needs what `make test` sets up beyond Python: those on a fixture
    parametrized with the services profile (the contract suites, the end-to-end serves), on an engine
    fixture, or marked in their module; `pytest -m "not services"` runs the rest on any machine."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_services = callspec is not None and "services" in callspec.params.values()
        if on_services or ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


@pytest.fixture
def adapters(tmp_path: Path) -> Iterator[Adapters]:
    """A fresh embedded deployment, installed for the handlers of this process."""
    built = build(Settings(data_dir=tmp_path / "data"))
    install(built)
    yield built
    install(None)
    built.close()


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def get(handler: Any, path: str, **params: object) -> tuple[int, Any]:
    """A GET through a function's handler as API Gateway sends it, with these query parameters
    (their text, as a URL carries them): the status and the decoded body."""
    event = load_event("reporter-list-crashes.json")  # API Gateway's shape; path and query replaced
    query = {name: str(value) for name, value in params.items()}
    event.update(path=path, queryStringParameters=query or None,
                 multiValueQueryStringParameters={name: [value] for name, value in query.items()} or None)
    response = handler(event, LocalContext(function_name="get"))
    return response["statusCode"], json.loads(response["body"])


def ok(answer: tuple[int, Any]) -> Any:
    status, body = answer
    assert status == 200, body
    return body


@contextmanager
def s3_bucket(monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[Any]:
    """A bucket on moto's S3 (no S3 runs here), and a client of it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3", region_name="eu-west-1")
        client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        yield client
