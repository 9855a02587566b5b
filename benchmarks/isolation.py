"""A deployment of its own for each benchmark: on `services`, a MySQL database (dropped afterwards),
Kafka topics and Couchbase keys under a fresh name; on `embedded`, a fresh data directory."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapters.mysql.database import MysqlDatabase, with_database
from adapters.settings import Settings


@contextmanager
def isolated(profile: str) -> Iterator[Settings]:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    data_dir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    base = Settings(profile=profile, data_dir=data_dir)  # type: ignore[arg-type]
    settings = base.model_copy(update={
        "mysql_url": with_database(base.mysql_url, name), "kafka_topic_prefix": f"{name}.",
        "couchbase_key_prefix": f"{name}:",
    }) if profile == "services" else base
    try:
        yield settings
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        if profile == "services":
            database = MysqlDatabase(settings.mysql_url)
            with database.connection().cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            database.close()


def environment(settings: Settings) -> dict[str, str]:
    """The settings as BLACKBOX_* variables, for a serve started as a child process."""
    return {
        "BLACKBOX_MYSQL_URL": settings.mysql_url,
        "BLACKBOX_KAFKA_TOPIC_PREFIX": settings.kafka_topic_prefix,
        "BLACKBOX_COUCHBASE_KEY_PREFIX": settings.couchbase_key_prefix,
    }
