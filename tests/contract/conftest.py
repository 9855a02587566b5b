"""Every adapter of a port runs the same contract suite: add an engine to ENGINES and each test
here runs against it unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.embedded.documents import SqliteDocumentStore
from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
from adapters.embedded.log import SqliteEventLog
from adapters.ports import CrashIndex, DocumentStore, EventLog, SessionCounters

ENGINES = ["embedded"]


@pytest.fixture(params=ENGINES)
def event_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventLog]:
    log = SqliteEventLog(tmp_path / "log.sqlite", partitions=3)
    yield log
    log.close()


@pytest.fixture(params=ENGINES)
def document_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocumentStore]:
    store = SqliteDocumentStore(tmp_path / "documents.sqlite")
    yield store
    store.close()


@pytest.fixture(params=ENGINES)
def crash_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CrashIndex]:
    index = SqliteCrashIndex(SqliteIndexDatabase(tmp_path / "index.sqlite"))
    yield index
    index.close()


@pytest.fixture(params=ENGINES)
def session_counters(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionCounters]:
    counters = SqliteSessionCounters(SqliteIndexDatabase(tmp_path / "index.sqlite"))
    yield counters
    counters.close()
