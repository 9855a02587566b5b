"""`blackbox serve` for the end-to-end tests, once per module and profile."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.serve import Serve
from tests.services import drop_database, mysql_url, namespace


@pytest.fixture(scope="module", params=["embedded", "services"])
def serve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One server per profile for the whole module; on `services` in a namespace of its own."""
    base = tmp_path_factory.mktemp(request.param)
    name = namespace()
    env = {
        "BLACKBOX_MYSQL_URL": mysql_url(name),
        "BLACKBOX_KAFKA_TOPIC_PREFIX": f"{name}.",
        "BLACKBOX_COUCHBASE_KEY_PREFIX": f"{name}:",
    } if request.param == "services" else {}
    server = Serve(base / "data", base / "serve.log", request.param, env)
    server.start()
    yield server
    if server.process is not None:
        assert server.stop() == 0
    if request.param == "services":
        drop_database(name)
