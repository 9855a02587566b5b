"""The one place that builds adapters from configuration. Handlers ask `current()`; the local
runtime and tests `install()` a set explicitly."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, get_args

from adapters.settings import Settings
from ports import (
    CrashIndex,
    DocumentStore,
    EventLog,
    ProjectStore,
    RankingStore,
    SessionCounters,
    SpillStore,
    SymbolStore,
)
from ports.issues import IssueStore

if TYPE_CHECKING:
    from adapters.embedded.documents import SqliteDocumentStore
    from adapters.embedded.index import SqliteIndexDatabase
    from adapters.embedded.log import SqliteEventLog
    from adapters.mysql.database import MysqlDatabase, MysqlTarget
    from crashes.grouping import Groupings
    from reporters.projects import Skus

Port = Literal["log", "documents", "index", "counters", "ranking", "spill", "projects", "symbols", "issues"]
PORTS: tuple[Port, ...] = get_args(Port)
# files and objects, no connection: nothing to close
UNCLOSED: frozenset[Port] = frozenset({"spill", "symbols"})

T = TypeVar("T")
# the embedded profile's files in a data directory
LOG_FILE = "log.sqlite"
INDEX_FILE = "index.sqlite"
DOCUMENTS_FILE = "documents.sqlite"
# what a report's body is kept past its retention, for its row's purge: the AWS one runs daily, and
# a run that failed is the next day's
PURGE_WAIT_DAYS = 2


class Once(Generic[T]):
    """A value made on first use, by whichever thread asks first, then kept. A failed attempt keeps
    nothing, so the next use tries again (an engine that was away may be back)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self.value: T | None = None

    def get(self) -> T:
        if self.value is None:
            with self._lock:
                if self.value is None:
                    self.value = self._make()
        return self.value


class _Port(Generic[T]):
    """An attribute of Adapters: its port, built on first use."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, adapters: Adapters, owner: type) -> T:
        port: T = adapters._ports[self._name].get()
        return port


class Wiring(Protocol):
    """How a profile makes each port (the methods are named after the ports)."""

    def log(self) -> EventLog: ...
    def documents(self) -> DocumentStore: ...
    def index(self) -> CrashIndex: ...
    def counters(self) -> SessionCounters: ...
    def ranking(self) -> RankingStore: ...
    def spill(self) -> SpillStore: ...
    def projects(self) -> ProjectStore: ...
    def symbols(self) -> SymbolStore: ...
    def issues(self) -> IssueStore: ...


class Adapters:
    """The ports of one process (a Lambda container, serve, a command), each built on its first
    use: a function builds only the ports it reaches (lambdas.functions.FUNCTION_PORTS), so
    an engine it does not use neither slows its cold start nor fails it: capture keeps answering
    202, through the spill store if need be, while Couchbase or MySQL is away."""

    log: _Port[EventLog] = _Port()
    documents: _Port[DocumentStore] = _Port()
    index: _Port[CrashIndex] = _Port()
    counters: _Port[SessionCounters] = _Port()
    ranking: _Port[RankingStore] = _Port()
    spill: _Port[SpillStore] = _Port()
    projects: _Port[ProjectStore] = _Port()
    symbols: _Port[SymbolStore] = _Port()
    issues: _Port[IssueStore] = _Port()

    def __init__(self, settings: Settings, wiring: Wiring) -> None:
        self.settings = settings
        self._ports: dict[str, Once[Any]] = {port: Once(getattr(wiring, port)) for port in PORTS}
        # what the hot paths keep of the stores, one a process (made on first use, as a port is): it
        # outlives an invocation, and is read again once stale
        self._groupings = Once(self._new_groupings)
        self._project_skus = Once(self._new_project_skus)

    @cached_property
    def key_skus(self) -> dict[str, list[str]]:
        """Title key id → the skus it may post: the deployment's (AWS) and the local title keys'."""
        return self.settings.key_skus | self.settings.api_keys.key_skus

    @property
    def groupings(self) -> Groupings:
        """Each sku's grouping, as the crash consumer reads it from the issues."""
        return self._groupings.get()

    def _new_groupings(self) -> Groupings:
        from crashes.grouping import Groupings

        return Groupings(self.issues)

    @property
    def project_skus(self) -> Skus:
        """Each project's sku, as a native upload reads it from the projects."""
        return self._project_skus.get()

    def _new_project_skus(self) -> Skus:
        from reporters.projects import Skus

        return Skus(self.projects)

    @property
    def documents_ttl_seconds(self) -> int:
        """A report's body is kept PURGE_WAIT_DAYS past its retention: its index row waits for the
        purge (daily in AWS, hourly under serve), and a report listed is never one without its body."""
        return (self.settings.retention_days + PURGE_WAIT_DAYS) * 86_400

    @property
    def built(self) -> list[Port]:
        return [port for port in PORTS if self._ports[port].value is not None]

    def close(self) -> None:
        for port in self.built:
            if port not in UNCLOSED:
                self._ports[port].get().close()


def build(settings: Settings) -> Adapters:
    """Connects to nothing: each port is built on its first use."""
    if settings.profile == "embedded":
        return Adapters(settings, _Embedded(settings))
    return Adapters(settings, _Engines(settings, _endpoints(settings)))


def data_directory(path: Path) -> Path:
    """`path`, made for this user alone where it is made here: it holds webhooks' signing secrets and
    players' reports. One made before is left as it is."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _spill_directory(settings: Settings) -> SpillStore:
    from adapters.spill.directory import DirectorySpillStore

    return DirectorySpillStore(data_directory(settings.data_dir) / "spill")


def _symbols_directory(settings: Settings) -> SymbolStore:
    from adapters.symbols.directory import DirectorySymbolStore

    return DirectorySymbolStore(data_directory(settings.data_dir) / "symbols")


# imports per port and profile: a Lambda package carries only the clients its profile needs, and a
# function loads only those of the ports it uses
class _Embedded:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        # the index, the counters and the leaderboards share one file, as they share one MySQL schema
        self._sql = Once(self._open_sql)

    def _open_sql(self) -> SqliteIndexDatabase:
        from adapters.embedded.index import SqliteIndexDatabase

        return SqliteIndexDatabase(data_directory(self._settings.data_dir) / INDEX_FILE)

    def log(self) -> SqliteEventLog:
        from adapters.embedded.log import SqliteEventLog

        return SqliteEventLog(data_directory(self._settings.data_dir) / LOG_FILE,
                              partitions=self._settings.log_partitions)

    def documents(self) -> SqliteDocumentStore:
        from adapters.embedded.documents import SqliteDocumentStore

        return SqliteDocumentStore(data_directory(self._settings.data_dir) / DOCUMENTS_FILE)

    def migrate(self) -> list[str]:
        """Opens each file of the data directory, which applies the migrations it lacks: those, by file."""
        files: dict[str, Callable[[], SqliteIndexDatabase | SqliteEventLog | SqliteDocumentStore]] = {
            INDEX_FILE: self._sql.get, LOG_FILE: self.log, DOCUMENTS_FILE: self.documents}
        applied: list[str] = []
        with ExitStack() as opened:  # each closed, also when the next fails to open
            for name, open_file in files.items():
                store = open_file()
                opened.callback(store.close)
                applied += [f"{name}: {migration}" for migration in store.db.applied]
        return applied

    def index(self) -> CrashIndex:
        from adapters.embedded.index import SqliteCrashIndex

        return SqliteCrashIndex(self._sql.get())

    def counters(self) -> SessionCounters:
        from adapters.embedded.index import SqliteSessionCounters

        return SqliteSessionCounters(self._sql.get())

    def ranking(self) -> RankingStore:
        from adapters.embedded.ranking import SqliteRankingStore

        return SqliteRankingStore(self._sql.get())

    def spill(self) -> SpillStore:
        return _spill_directory(self._settings)

    def projects(self) -> ProjectStore:
        from adapters.embedded.index import SqliteProjectStore

        return SqliteProjectStore(self._sql.get())

    def symbols(self) -> SymbolStore:
        return _symbols_directory(self._settings)

    def issues(self) -> IssueStore:
        from adapters.embedded.issues import SqliteIssueStore

        return SqliteIssueStore(self._sql.get())


class Endpoints(Protocol):
    """Where the engines are and how to sign in: settings on one machine, MSK IAM and Secrets
    Manager in AWS (adapters.aws). Each is asked first when a port that needs it is built;
    mysql_target again for each new connection (a TargetProvider)."""

    def kafka_config(self) -> dict[str, Any]: ...
    def mysql_target(self, *, force: bool = False) -> MysqlTarget: ...
    def couchbase_credentials(self) -> tuple[str, str]: ...
    def spill(self) -> SpillStore: ...
    def symbols(self) -> SymbolStore: ...


class _LocalEndpoints:
    """The services profile: the engines scripts/services runs on this machine."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def kafka_config(self) -> dict[str, Any]:
        from adapters.kafka.auth import plaintext

        return plaintext(self._settings.kafka_bootstrap)

    def mysql_target(self, *, force: bool = False) -> MysqlTarget:
        from adapters.mysql.database import MysqlTarget

        return MysqlTarget.parse(self._settings.mysql_url)

    def couchbase_credentials(self) -> tuple[str, str]:
        return self._settings.couchbase_username, self._settings.couchbase_password

    def spill(self) -> SpillStore:
        return _spill_directory(self._settings)

    def symbols(self) -> SymbolStore:
        return _symbols_directory(self._settings)


def _endpoints(settings: Settings) -> Endpoints:
    if settings.profile == "aws":
        from adapters.aws import AwsEndpoints

        return AwsEndpoints(settings)
    return _LocalEndpoints(settings)


def _mysql(settings: Settings, endpoints: Endpoints) -> MysqlDatabase:
    """The database, at the endpoints' target: on services its URL's credentials, whose refusal
    stands; in AWS a secret's, behind an RDS Proxy that refuses clients until its target registers."""
    from adapters.mysql.database import MysqlDatabase

    return MysqlDatabase(endpoints.mysql_target, given=settings.profile != "aws")


class _Engines:
    """Kafka, MySQL and Couchbase: the services profile on one machine, MSK/RDS/EC2 in AWS."""

    def __init__(self, settings: Settings, endpoints: Endpoints) -> None:
        self._settings = settings
        self._endpoints = endpoints
        # the index, the counters, the leaderboards and the projects share one database and its connections
        self._sql = Once(self._open_sql)

    def _open_sql(self) -> MysqlDatabase:
        return _mysql(self._settings, self._endpoints)

    def log(self) -> EventLog:
        from adapters.kafka.log import KafkaEventLog

        settings = self._settings
        return KafkaEventLog(self._endpoints.kafka_config(), partitions=settings.log_partitions,
                             topic_prefix=settings.kafka_topic_prefix, create_topics=settings.profile != "aws",
                             retention_days=settings.log_retention_days,
                             data_retention_days=settings.retention_days)

    def documents(self) -> DocumentStore:
        from adapters.couchbase.documents import CouchbaseDocumentStore

        settings = self._settings
        username, password = self._endpoints.couchbase_credentials()
        return CouchbaseDocumentStore(settings.couchbase_url, settings.couchbase_bucket, username, password,
                                      settings.couchbase_key_prefix)

    def index(self) -> CrashIndex:
        from adapters.mysql.index import MysqlCrashIndex

        return MysqlCrashIndex(self._sql.get())

    def counters(self) -> SessionCounters:
        from adapters.mysql.index import MysqlSessionCounters

        return MysqlSessionCounters(self._sql.get())

    def ranking(self) -> RankingStore:
        from adapters.mysql.ranking import MysqlRankingStore

        return MysqlRankingStore(self._sql.get())

    def spill(self) -> SpillStore:
        return self._endpoints.spill()

    def projects(self) -> ProjectStore:
        from adapters.mysql.index import MysqlProjectStore

        return MysqlProjectStore(self._sql.get())

    def symbols(self) -> SymbolStore:
        return self._endpoints.symbols()

    def issues(self) -> IssueStore:
        from adapters.mysql.issues import MysqlIssueStore

        return MysqlIssueStore(self._sql.get())


def migrate(settings: Settings) -> list[str]:
    """Applies pending schema migrations: MySQL's, or each file's of an embedded data directory
    (which serve also applies as it opens them)."""
    if settings.profile == "embedded":
        return _Embedded(settings).migrate()
    database = _mysql(settings, _endpoints(settings))
    try:
        return database.migrate(wait_s=settings.mysql_migrate_deadline_s)
    finally:
        database.close()


_current: Adapters | None = None


def install(adapters: Adapters | None) -> None:
    global _current  # noqa: PLW0603 — one set of adapters per process, like a Lambda container
    _current = adapters


def current() -> Adapters:
    """Made once per process (a Lambda container reuses it across invocations); its ports are
    built on first use."""
    if _current is None:
        install(build(Settings()))
    assert _current is not None
    return _current
