"""The deploy-time custom resources, run against the real engines: topics through the Kafka admin
API, migrations on MariaDB; both idempotent, and Delete keeps the data."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from adapters.mysql.database import MysqlDatabase
from core.topics import ALL_TOPICS
from lambdas.provisioning import create_topics, migrate_schema
from tests.services import drop_database, mysql_url, namespace, settings


def test_topics_are_created_once_with_their_partitions(monkeypatch: pytest.MonkeyPatch):
    prefix = f"{namespace()}."
    monkeypatch.setenv("BLACKBOX_PROFILE", "services")
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", prefix)
    event = {"RequestType": "Create", "ResourceProperties": {"Partitions": "3"}}
    assert create_topics(event, None) == {"PhysicalResourceId": f"topics:{prefix}"}
    assert create_topics(event | {"RequestType": "Update"}, None)["PhysicalResourceId"] == f"topics:{prefix}"
    create_topics({"RequestType": "Delete", "ResourceProperties": {}}, None)
    topics = AdminClient({"bootstrap.servers": settings().kafka_bootstrap}).list_topics(timeout=10).topics
    for topic in ALL_TOPICS:
        assert len(topics[prefix + topic].partitions) == 3


def test_migrations_apply_then_do_nothing(monkeypatch: pytest.MonkeyPatch):
    name = namespace()
    monkeypatch.setenv("BLACKBOX_PROFILE", "services")
    monkeypatch.setenv("BLACKBOX_MYSQL_URL", mysql_url(name))
    try:
        for kind in ("Create", "Update", "Delete"):
            assert migrate_schema({"RequestType": kind, "ResourceProperties": {}}, None) == \
                {"PhysicalResourceId": "schema"}
        database = MysqlDatabase(mysql_url(name))
        assert database.migrate() == []  # all applied already
        database.close()
    finally:
        drop_database(name)
