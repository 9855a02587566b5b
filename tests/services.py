"""The real engines for tests: scripts/services must have started them (`make test` and .ci/run
do). Each test gets its own namespace in them: a MySQL database, a topic prefix, a key prefix."""

from __future__ import annotations

import os
import socket
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from adapters.mysql.database import MysqlDatabase, with_database
from adapters.settings import Settings


def settings(**overrides: str) -> Settings:
    return Settings(profile="services", **overrides)  # type: ignore[arg-type]


# the pytest run's mark (xdist's workers take it from the controller's environment): each
# namespace begins with it, and the topics and groups a run made on the broker go with it. Not a
# BLACKBOX_ name: the CLI warns of any it does not know (a misspelt setting), in every serve a test runs
RUN_ENV = "PYTEST_BLACKBOX_RUN"


def run_prefix() -> str:
    return f"t{os.environ.setdefault(RUN_ENV, uuid.uuid4().hex[:8])}"


def namespace() -> str:
    return f"{run_prefix()}{uuid.uuid4().hex[:10]}"


def on_kafka(admin: AdminClient, prefix: str) -> tuple[list[str], list[str]]:
    """The broker's topics and consumer groups whose names begin with `prefix`."""
    groups = admin.list_consumer_groups(request_timeout=30).result(timeout=35).valid
    return ([name for name in admin.list_topics(timeout=30).topics if name.startswith(prefix)],
            [group.group_id for group in groups if group.group_id.startswith(prefix)])


def drop_what_the_run_made_on_kafka() -> None:
    """The run's topics and consumer groups (its namespaces'), where a broker answers: left behind,
    a developer's broker grows by hundreds of topics a run, and each start of it loads them all.
    Tidying only: a broker that fails it (one still starting after an outage test) fails no run."""
    bootstrap = settings().kafka_bootstrap
    try:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        socket.create_connection((host, int(port)), timeout=1).close()
    except (OSError, ValueError):  # no broker here: the run needed none
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        topics, groups = on_kafka(admin, run_prefix())
        if groups:
            for future in admin.delete_consumer_groups(groups, request_timeout=30).values():
                with suppress(KafkaException):  # one still held by a member: it expires with its offsets
                    future.result(timeout=35)
        if topics:
            for future in admin.delete_topics(topics, request_timeout=30).values():
                future.result(timeout=35)
    except (KafkaException, TimeoutError) as error:
        warnings.warn(f"the run's topics and groups on Kafka were not all dropped: {error}", stacklevel=1)


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
