"""The aws profile's wiring, without a network: Secrets Manager through moto, MSK IAM tokens signed
locally from static credentials."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from confluent_kafka import Producer
from moto import mock_aws

from adapters.aws import mysql_url, resolve
from adapters.kafka.auth import msk_iam


@pytest.fixture
def static_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_msk_iam_settings_and_a_signed_token(static_credentials):
    config = msk_iam("b-1.msk.example:9098,b-2.msk.example:9098", "eu-west-1")
    assert config["bootstrap.servers"] == "b-1.msk.example:9098,b-2.msk.example:9098"
    assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_SSL", "OAUTHBEARER")
    token, expiry_s = config["oauth_cb"](None)
    url = urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query = parse_qs(url.query)
    assert url.hostname == "kafka.eu-west-1.amazonaws.com"
    assert query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Credential"][0].startswith("AKIAIOSFODNN7EXAMPLE/")
    assert "/eu-west-1/kafka-cluster/aws4_request" in query["X-Amz-Credential"][0]
    assert time.time() < expiry_s <= time.time() + 3600  # seconds, not milliseconds


def test_confluent_kafka_accepts_the_msk_iam_settings(static_credentials):
    producer = Producer(msk_iam("127.0.0.1:1", "eu-west-1") | {"socket.connection.setup.timeout.ms": 1000})
    producer.poll(0)
    assert producer.flush(0) == 0


def test_rds_secret_becomes_a_url_through_the_proxy():
    secret = {"username": "admin", "password": "p@ss/w:rd", "host": "db.internal", "port": 3306, "dbname": "blackbox"}
    assert mysql_url(secret, "proxy.internal") == "mysql://admin:p%40ss%2Fw%3Ard@proxy.internal:3306/blackbox"
    assert mysql_url(secret, None).endswith("@db.internal:3306/blackbox")


@mock_aws
def test_resolve_reads_both_secrets(static_credentials):
    client = boto3.client("secretsmanager", region_name="eu-west-1")
    db = client.create_secret(Name="blackbox/db", SecretString=json.dumps(
        {"username": "blackbox", "password": "s3cret", "host": "rds.internal", "port": 3306, "dbname": "blackbox"}))
    cb = client.create_secret(Name="blackbox/couchbase", SecretString=json.dumps(
        {"username": "cb-user", "password": "cb-pass"}))
    connections = resolve(client, region="eu-west-1", kafka_bootstrap="b-1:9098", mysql_secret_arn=db["ARN"],
                          mysql_proxy_host="proxy.internal", couchbase_secret_arn=cb["ARN"])
    assert connections.mysql_url == "mysql://blackbox:s3cret@proxy.internal:3306/blackbox"
    assert (connections.couchbase_username, connections.couchbase_password) == ("cb-user", "cb-pass")
    assert connections.kafka_config["sasl.mechanism"] == "OAUTHBEARER"
