"""The aws profile's wiring, without a network: Secrets Manager through moto, MSK IAM tokens signed
locally from static credentials."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from confluent_kafka import Producer
from moto import mock_aws

from adapters import aws
from adapters.aws import AwsEndpoints, mysql_url
from adapters.factory import Settings, build, install
from adapters.kafka.auth import msk_iam
from lambdas import capture
from local_runtime.functions import LocalContext
from tests.conftest import load_event


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


@pytest.fixture
def aws_settings(static_credentials) -> Iterator[Settings]:
    """The aws profile as a function's environment sets it, against moto: both secrets and the spill
    bucket exist; MSK is a closed port."""
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="eu-west-1")
        db = secrets.create_secret(Name="blackbox/db", SecretString=json.dumps(
            {"username": "blackbox", "password": "s3cret", "host": "rds.internal", "port": 3306, "dbname": "blackbox"}))
        cb = secrets.create_secret(Name="blackbox/couchbase", SecretString=json.dumps(
            {"username": "cb-user", "password": "cb-pass"}))
        boto3.client("s3", region_name="eu-west-1").create_bucket(
            Bucket="spill", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        yield Settings(profile="aws", aws_region="eu-west-1", kafka_bootstrap="127.0.0.1:1",
                       mysql_secret_arn=db["ARN"], mysql_proxy_host="proxy.internal",
                       couchbase_secret_arn=cb["ARN"], spill_bucket="spill")


@pytest.fixture
def secrets_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ARNs of the secrets read, in order."""
    read: list[str] = []
    real = aws.read_secret

    def recording(client: Any, arn: str) -> dict[str, Any]:
        read.append(arn)
        return real(client, arn)

    monkeypatch.setattr(aws, "read_secret", recording)
    return read


def test_each_connection_reads_its_own_secret(aws_settings: Settings, secrets_read: list[str]):
    endpoints = AwsEndpoints(aws_settings)
    assert endpoints.kafka_config()["sasl.mechanism"] == "OAUTHBEARER" and secrets_read == []
    assert endpoints.mysql_url() == "mysql://blackbox:s3cret@proxy.internal:3306/blackbox"
    assert secrets_read == [aws_settings.mysql_secret_arn]
    assert endpoints.couchbase_credentials() == ("cb-user", "cb-pass")
    assert secrets_read == [aws_settings.mysql_secret_arn, aws_settings.couchbase_secret_arn]


def test_capture_builds_only_the_log_and_spill_and_reads_no_secret(aws_settings: Settings, secrets_read: list[str]):
    """Capture's role may read no secret (stacks/access.py): building its ports must not need one.
    Here MSK is away too, so the crash lands in the S3 spill store and is still accepted."""
    adapters = build(aws_settings)
    install(adapters)
    try:
        response = capture.handler(load_event("capture-crash.json"), LocalContext("capture"))
        assert response["statusCode"] == 202
        assert adapters.built == ["log", "spill"] and secrets_read == []
        [spilled] = adapters.spill.list(10)
        assert json.loads(spilled.record.value)["eventId"] == json.loads(response["body"])["eventId"]
        # a port on MySQL reads the MySQL secret when it is built, and only that one
        adapters.index  # noqa: B018
        assert secrets_read == [aws_settings.mysql_secret_arn]
    finally:
        install(None)
        adapters.close()
