"""Every adapter of a port runs the same contract suite: each test here runs, unchanged, against
the embedded adapter (SQLite) and the real engine (Kafka, Couchbase, MariaDB)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from adapters.couchbase.documents import CouchbaseDocumentStore
from adapters.embedded.documents import SqliteDocumentStore
from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteProjectStore, SqliteSessionCounters
from adapters.embedded.issues import SqliteIssueStore
from adapters.embedded.log import SqliteEventLog
from adapters.embedded.ranking import SqliteRankingStore
from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from adapters.mysql.database import MysqlDatabase
from adapters.mysql.index import MysqlCrashIndex, MysqlProjectStore, MysqlSessionCounters
from adapters.mysql.issues import MysqlIssueStore
from adapters.mysql.ranking import MysqlRankingStore
from ports import CrashIndex, DocumentStore, EventLog, ProjectStore, RankingStore, SessionCounters
from tests.services import mysql_database, namespace, settings

ENGINES = ["embedded", "services"]
T = TypeVar("T")


@pytest.fixture(params=ENGINES)
def event_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventLog]:
    if request.param == "embedded":
        log: EventLog = SqliteEventLog(tmp_path / "log.sqlite", partitions=3)
    else:
        log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=3, topic_prefix=f"{namespace()}.")
    yield log
    log.close()


@pytest.fixture(params=ENGINES)
def document_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocumentStore]:
    if request.param == "embedded":
        store: DocumentStore = SqliteDocumentStore(tmp_path / "documents.sqlite")
    else:
        s = settings()
        store = CouchbaseDocumentStore(s.couchbase_url, s.couchbase_bucket, s.couchbase_username,
                                       s.couchbase_password, key_prefix=f"{namespace()}:")
    yield store
    store.close()


@pytest.fixture(params=ENGINES)
def crash_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CrashIndex]:
    if request.param == "embedded":
        yield SqliteCrashIndex(SqliteIndexDatabase(tmp_path / "index.sqlite"))
        return
    with mysql_database(namespace()) as database:
        yield MysqlCrashIndex(database)


@pytest.fixture(params=ENGINES)
def session_counters(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionCounters]:
    if request.param == "embedded":
        yield SqliteSessionCounters(SqliteIndexDatabase(tmp_path / "index.sqlite"))
        return
    with mysql_database(namespace()) as database:
        yield MysqlSessionCounters(database)


@pytest.fixture(params=ENGINES)
def ranking_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RankingStore]:
    if request.param == "embedded":
        yield SqliteRankingStore(SqliteIndexDatabase(tmp_path / "index.sqlite"))
        return
    with mysql_database(namespace()) as database:
        yield MysqlRankingStore(database)


@pytest.fixture(params=ENGINES)
def project_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProjectStore]:
    if request.param == "embedded":
        yield SqliteProjectStore(SqliteIndexDatabase(tmp_path / "index.sqlite"))
        return
    with mysql_database(namespace()) as database:
        yield MysqlProjectStore(database)


def index_with(sqlite_store: Callable[[SqliteIndexDatabase], T],
               mysql_store: Callable[[MysqlDatabase], T]) -> Callable[..., Iterator[tuple[CrashIndex, T]]]:
    """A fixture: the crash index and another store, made on the same database, as a deployment has
    them."""

    @pytest.fixture(params=ENGINES)
    def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[CrashIndex, T]]:
        if request.param == "embedded":
            database = SqliteIndexDatabase(tmp_path / "index.sqlite")
            yield SqliteCrashIndex(database), sqlite_store(database)
            return
        with mysql_database(namespace()) as mysql:
            yield MysqlCrashIndex(mysql), mysql_store(mysql)

    return stores


# the crash index and the issues
stores = index_with(SqliteIssueStore, MysqlIssueStore)
