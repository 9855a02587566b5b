"""The real engines for tests: scripts/services must have started them (`make test` and .ci/run
do). Each test gets its own namespace in them: a MySQL database, a topic prefix, a key prefix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.mysql.database import MysqlDatabase, with_database
from adapters.settings import Settings


def settings(**overrides: str) -> Settings:
    return Settings(profile="services", **overrides)  # type: ignore[arg-type]


def namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def mysql_url(database: str) -> str:
    return with_database(settings().mysql_url, database)


@contextmanager
def mysql_database(name: str) -> Iterator[MysqlDatabase]:
    """A freshly migrated database, dropped afterwards."""
    database = MysqlDatabase(mysql_url(name))
    database.migrate()
    try:
        yield database
    finally:
        database.close()
        drop_database(name)


def drop_database(name: str) -> None:
    database = MysqlDatabase(mysql_url(name))
    with database.connection().cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    database.close()
