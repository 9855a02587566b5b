"""The one place that builds adapters from configuration. Handlers ask `current()`; the local
runtime and tests `install()` a set explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.ports import CrashIndex, DocumentStore, EventLog, RankingStore, SessionCounters, SpillStore
from core.access import ApiKeys
from crashes.spikes import SpikePolicy

# written by scripts/services start: where the local engines listen
SERVICES_ENV_FILE = ".services/services.env"


class Settings(BaseSettings):
    """Read from BLACKBOX_* environment variables, then the services env file; the command line
    overrides both. The profile picks the adapters; the other fields configure them."""

    model_config = SettingsConfigDict(
        env_prefix="BLACKBOX_", env_file=SERVICES_ENV_FILE, env_nested_delimiter="__", extra="ignore"
    )

    profile: Literal["embedded", "services", "aws"] = "embedded"
    data_dir: Path = Path("blackbox-data")
    log_partitions: int = 4
    retention_days: int = 90
    # the event log is a buffer: Kafka's (and MSK's) default of 7 days
    log_retention_days: int = 7
    # e.g. BLACKBOX_SPIKES__FACTOR=5
    spikes: SpikePolicy = SpikePolicy()
    # local keys by role (BLACKBOX_API_KEYS__INGEST='["…"]'); in AWS, API Gateway's keys and IAM,
    # and the ids of the keys that may post scores (set by the deployment)
    api_keys: ApiKeys = ApiKeys()
    server_key_ids: list[str] = []
    kafka_bootstrap: str = "127.0.0.1:19092"
    kafka_topic_prefix: str = ""
    mysql_url: str = "mysql://blackbox:blackbox@127.0.0.1:13306/blackbox"
    couchbase_url: str = "couchbase://127.0.0.1"
    couchbase_bucket: str = "blackbox"
    couchbase_username: str = "blackbox"
    couchbase_password: str = ""
    couchbase_key_prefix: str = ""
    # the aws profile: MSK bootstrap brokers come from kafka_bootstrap, credentials from Secrets Manager
    aws_region: str = "us-east-1"
    mysql_secret_arn: str = ""
    mysql_proxy_host: str | None = None
    couchbase_secret_arn: str = ""
    spill_bucket: str = ""
    # only `blackbox bench` uses Redis: the sorted-set baseline for leaderboards
    redis_url: str = "redis://127.0.0.1:16379/0"


@dataclass
class Adapters:
    settings: Settings
    log: EventLog
    documents: DocumentStore
    index: CrashIndex
    counters: SessionCounters
    ranking: RankingStore
    spill: SpillStore

    @property
    def retention_seconds(self) -> int:
        return self.settings.retention_days * 86_400

    def close(self) -> None:
        for part in (self.log, self.documents, self.index, self.counters, self.ranking):
            part.close()


def build(settings: Settings) -> Adapters:
    # imports per profile: a Lambda package carries only the clients its profile needs
    if settings.profile == "embedded":
        return _embedded(settings)
    if settings.profile == "aws":
        import boto3

        from adapters.aws import resolve

        connections = resolve(
            boto3.client("secretsmanager", region_name=settings.aws_region), region=settings.aws_region,
            kafka_bootstrap=settings.kafka_bootstrap, mysql_secret_arn=settings.mysql_secret_arn,
            mysql_proxy_host=settings.mysql_proxy_host, couchbase_secret_arn=settings.couchbase_secret_arn,
        )
        from adapters.spill.s3 import S3SpillStore

        spill = S3SpillStore(boto3.client("s3", region_name=settings.aws_region), settings.spill_bucket)
        return _engines(settings, spill, kafka_config=connections.kafka_config, mysql_url=connections.mysql_url,
                        couchbase_username=connections.couchbase_username,
                        couchbase_password=connections.couchbase_password)
    from adapters.kafka.auth import plaintext

    return _engines(settings, _spill_directory(settings), kafka_config=plaintext(settings.kafka_bootstrap),
                    mysql_url=settings.mysql_url, couchbase_username=settings.couchbase_username,
                    couchbase_password=settings.couchbase_password)


def _spill_directory(settings: Settings) -> SpillStore:
    from adapters.spill.directory import DirectorySpillStore

    return DirectorySpillStore(settings.data_dir / "spill")


def _embedded(settings: Settings) -> Adapters:
    from adapters.embedded.documents import SqliteDocumentStore
    from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
    from adapters.embedded.log import SqliteEventLog
    from adapters.embedded.ranking import SqliteRankingStore

    data = settings.data_dir
    sql = SqliteIndexDatabase(data / "index.sqlite")
    return Adapters(
        settings=settings,
        log=SqliteEventLog(data / "log.sqlite", partitions=settings.log_partitions),
        documents=SqliteDocumentStore(data / "documents.sqlite"),
        index=SqliteCrashIndex(sql),
        counters=SqliteSessionCounters(sql),
        ranking=SqliteRankingStore(sql),
        spill=_spill_directory(settings),
    )


def _engines(
    settings: Settings, spill: SpillStore, *, kafka_config: dict[str, Any], mysql_url: str, couchbase_username: str,
    couchbase_password: str,
) -> Adapters:
    """Kafka, MySQL and Couchbase: the services profile on one machine, MSK/RDS/EC2 in AWS."""
    from adapters.couchbase.documents import CouchbaseDocumentStore
    from adapters.kafka.log import KafkaEventLog
    from adapters.mysql.database import MysqlDatabase
    from adapters.mysql.index import MysqlCrashIndex, MysqlSessionCounters
    from adapters.mysql.ranking import MysqlRankingStore

    sql = MysqlDatabase(mysql_url)
    return Adapters(
        settings=settings,
        log=KafkaEventLog(kafka_config, partitions=settings.log_partitions, topic_prefix=settings.kafka_topic_prefix,
                          create_topics=settings.profile != "aws", retention_days=settings.log_retention_days),
        documents=CouchbaseDocumentStore(
            settings.couchbase_url, settings.couchbase_bucket, couchbase_username, couchbase_password,
            settings.couchbase_key_prefix,
        ),
        index=MysqlCrashIndex(sql),
        counters=MysqlSessionCounters(sql),
        ranking=MysqlRankingStore(sql),
        spill=spill,
    )


def migrate(settings: Settings) -> list[str]:
    """Applies pending schema migrations (embedded files create their schema when opened)."""
    if settings.profile == "embedded":
        return []
    from adapters.mysql.database import MysqlDatabase

    url = settings.mysql_url
    if settings.profile == "aws":
        import boto3

        from adapters.aws import mysql_url, read_secret

        secret = read_secret(boto3.client("secretsmanager", region_name=settings.aws_region), settings.mysql_secret_arn)
        url = mysql_url(secret, settings.mysql_proxy_host)
    database = MysqlDatabase(url)
    try:
        return database.migrate()
    finally:
        database.close()


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
