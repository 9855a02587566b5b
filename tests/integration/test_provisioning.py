"""The deploy-time custom resources, run against the real engines: topics through the Kafka admin
API, migrations on MariaDB; both idempotent, and Delete keeps the data."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import boto3
import pytest
from confluent_kafka.admin import AdminClient
from moto import mock_aws

from adapters.mysql.database import MysqlDatabase, MysqlTarget
from lambdas.provisioning import create_topics, migrate_schema
from local_runtime.context import LocalContext
from pipeline.topics import ALL_TOPICS
from tests.services import drop_database, mysql_url, namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services

# CloudFormation's custom-resource calls come with Lambda's context, which the handlers log
CONTEXT = LocalContext("provisioning")


def test_topics_are_created_once_with_their_partitions(monkeypatch: pytest.MonkeyPatch):
    prefix = f"{namespace()}."
    monkeypatch.setenv("BLACKBOX_PROFILE", "services")
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", prefix)
    days = {prefix + topic: "7" for topic in ALL_TOPICS}
    event = {"RequestType": "Create", "ResourceProperties": {"Partitions": "3", "RetentionDays": days}}
    assert create_topics(event, CONTEXT) == {"PhysicalResourceId": f"topics:{prefix}"}
    assert create_topics(event | {"RequestType": "Update"}, CONTEXT)["PhysicalResourceId"] == f"topics:{prefix}"
    create_topics({"RequestType": "Delete", "ResourceProperties": {}}, CONTEXT)
    topics = AdminClient({"bootstrap.servers": settings().kafka_bootstrap}).list_topics(timeout=10).topics
    for topic in ALL_TOPICS:
        assert len(topics[prefix + topic].partitions) == 3


def test_migrations_apply_then_do_nothing(monkeypatch: pytest.MonkeyPatch):
    name = namespace()
    monkeypatch.setenv("BLACKBOX_PROFILE", "services")
    monkeypatch.setenv("BLACKBOX_MYSQL_URL", mysql_url(name))
    try:
        for kind in ("Create", "Update", "Delete"):
            assert migrate_schema({"RequestType": kind, "ResourceProperties": {}}, CONTEXT) == \
                {"PhysicalResourceId": "schema"}
        database = MysqlDatabase(mysql_url(name))
        assert database.migrate() == []  # all applied already
        database.close()
    finally:
        drop_database(name)


@mock_aws
def test_migrations_on_the_aws_profile_take_the_database_from_secrets_manager(monkeypatch: pytest.MonkeyPatch):
    name = namespace()
    url = urlsplit(mysql_url(name))
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    secret = boto3.client("secretsmanager", region_name="eu-west-1").create_secret(Name="db", SecretString=json.dumps({
        "username": url.username, "password": url.password, "host": "unreachable.invalid", "port": url.port,
        "dbname": name}))
    monkeypatch.setenv("BLACKBOX_PROFILE", "aws")
    monkeypatch.setenv("BLACKBOX_AWS_REGION", "eu-west-1")
    monkeypatch.setenv("BLACKBOX_MYSQL_SECRET_ARN", secret["ARN"])
    monkeypatch.setenv("BLACKBOX_MYSQL_PROXY_HOST", str(url.hostname))  # the proxy, not the secret's host
    # the aws profile trusts the system store, as Lambda trusts Amazon's root: here it holds the local CA
    monkeypatch.setenv("SSL_CERT_FILE", str(MysqlTarget.parse(mysql_url(name)).ca_file))
    try:
        migrate_schema({"RequestType": "Create", "ResourceProperties": {}}, CONTEXT)
        database = MysqlDatabase(mysql_url(name))
        assert database.migrate() == []
        database.close()
    finally:
        drop_database(name)
