"""The one place that builds adapters from configuration. Handlers ask `current()`; the local
runtime and tests `install()` a set explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.ports import CrashIndex, DocumentStore, EventLog, SessionCounters

# written by scripts/services start: where the local engines listen
SERVICES_ENV_FILE = ".services/services.env"


class Settings(BaseSettings):
    """Read from BLACKBOX_* environment variables, then the services env file; the command line
    overrides both. The profile picks the adapters; the other fields configure them."""

    model_config = SettingsConfigDict(env_prefix="BLACKBOX_", env_file=SERVICES_ENV_FILE, extra="ignore")

    profile: Literal["embedded", "services"] = "embedded"
    data_dir: Path = Path("blackbox-data")
    log_partitions: int = 4
    retention_days: int = 90
    kafka_bootstrap: str = "127.0.0.1:19092"
    kafka_topic_prefix: str = ""
    mysql_url: str = "mysql://blackbox:blackbox@127.0.0.1:13306/blackbox"
    couchbase_url: str = "couchbase://127.0.0.1"
    couchbase_bucket: str = "blackbox"
    couchbase_username: str = "blackbox"
    couchbase_password: str = ""
    couchbase_key_prefix: str = ""


@dataclass
class Adapters:
    settings: Settings
    log: EventLog
    documents: DocumentStore
    index: CrashIndex
    counters: SessionCounters

    @property
    def retention_seconds(self) -> int:
        return self.settings.retention_days * 86_400

    def close(self) -> None:
        for part in (self.log, self.documents, self.index, self.counters):
            part.close()


def build(settings: Settings) -> Adapters:
    # imports per profile: a Lambda package carries only the clients its profile needs
    if settings.profile == "services":
        return _services(settings)
    return _embedded(settings)


def _embedded(settings: Settings) -> Adapters:
    from adapters.embedded.documents import SqliteDocumentStore
    from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
    from adapters.embedded.log import SqliteEventLog

    data = settings.data_dir
    sql = SqliteIndexDatabase(data / "index.sqlite")
    return Adapters(
        settings=settings,
        log=SqliteEventLog(data / "log.sqlite", partitions=settings.log_partitions),
        documents=SqliteDocumentStore(data / "documents.sqlite"),
        index=SqliteCrashIndex(sql),
        counters=SqliteSessionCounters(sql),
    )


def _services(settings: Settings) -> Adapters:
    from adapters.couchbase.documents import CouchbaseDocumentStore
    from adapters.kafka.auth import plaintext
    from adapters.kafka.log import KafkaEventLog
    from adapters.mysql.database import MysqlDatabase
    from adapters.mysql.index import MysqlCrashIndex, MysqlSessionCounters

    sql = MysqlDatabase(settings.mysql_url)
    return Adapters(
        settings=settings,
        log=KafkaEventLog(
            plaintext(settings.kafka_bootstrap), partitions=settings.log_partitions,
            topic_prefix=settings.kafka_topic_prefix,
        ),
        documents=CouchbaseDocumentStore(
            settings.couchbase_url, settings.couchbase_bucket, settings.couchbase_username,
            settings.couchbase_password, settings.couchbase_key_prefix,
        ),
        index=MysqlCrashIndex(sql),
        counters=MysqlSessionCounters(sql),
    )


def migrate(settings: Settings) -> list[str]:
    """Applies pending schema migrations (embedded files create their schema when opened)."""
    if settings.profile == "services":
        from adapters.mysql.database import MysqlDatabase

        database = MysqlDatabase(settings.mysql_url)
        try:
            return database.migrate()
        finally:
            database.close()
    return []


_current: Adapters | None = None


def install(adapters: Adapters | None) -> None:
    global _current  # noqa: PLW0603 — one set of adapters per process, like a Lambda container
    _current = adapters


def current() -> Adapters:
    """Built once per process (a Lambda container reuses it across invocations)."""
    if _current is None:
        install(build(Settings()))
    assert _current is not None
    return _current
