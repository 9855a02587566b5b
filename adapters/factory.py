"""The one place that builds adapters from configuration. Handlers ask `current()`; the local
runtime and tests `install()` a set explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

from adapters.embedded.documents import SqliteDocumentStore
from adapters.embedded.index import SqliteCrashIndex, SqliteIndexDatabase, SqliteSessionCounters
from adapters.embedded.log import SqliteEventLog
from adapters.ports import CrashIndex, DocumentStore, EventLog, SessionCounters


class Settings(BaseSettings):
    """Read from BLACKBOX_* environment variables; the command line overrides them."""

    model_config = SettingsConfigDict(env_prefix="BLACKBOX_")

    profile: Literal["embedded"] = "embedded"
    data_dir: Path = Path("blackbox-data")
    log_partitions: int = 4
    retention_days: int = 90


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
    data = settings.data_dir
    sql = SqliteIndexDatabase(data / "index.sqlite")
    return Adapters(
        settings=settings,
        log=SqliteEventLog(data / "log.sqlite", partitions=settings.log_partitions),
        documents=SqliteDocumentStore(data / "documents.sqlite"),
        index=SqliteCrashIndex(sql),
        counters=SqliteSessionCounters(sql),
    )


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
