"""The aws profile's wiring, with AWS's APIs in moto: MSK IAM tokens signed locally from static
credentials, secrets read per port from Secrets Manager, and every function's ports built from the
very environment the stacks give it, against the local engines (scripts/services)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from aws_cdk.assertions import Template
from confluent_kafka import Producer
from moto import mock_aws

from adapters import aws
from adapters.aws import AwsEndpoints, mysql_url
from adapters.factory import Adapters, build, install
from adapters.kafka.auth import msk_iam
from adapters.mysql.database import MysqlTarget
from adapters.settings import Settings
from lambdas import capture
from lambdas.functions import FUNCTION_PORTS, FUNCTIONS
from local_runtime.context import LocalContext
from stacks.access import SQL_PORTS
from tests.conftest import load_event
from tests.infrastructure.conftest import blackbox
from tests.services import mysql_database, namespace
from tests.services import settings as services_settings


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


MYSQL_SECRET = {"username": "blackbox", "password": "s3cret", "host": "rds.internal", "port": 3306,
                "dbname": "blackbox"}


@pytest.fixture
def aws_settings(static_credentials) -> Iterator[Settings]:
    """The aws profile as a function's environment sets it, against moto: both secrets and the spill
    bucket exist; MSK is a closed port."""
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="eu-west-1")
        db = secrets.create_secret(Name="blackbox/db", SecretString=json.dumps(MYSQL_SECRET))
        cb = secrets.create_secret(Name="blackbox/couchbase", SecretString=json.dumps(
            {"username": "cb-user", "password": "cb-pass"}))
        boto3.client("s3", region_name="eu-west-1").create_bucket(
            Bucket="spill", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        yield Settings(profile="aws", aws_region="eu-west-1", kafka_bootstrap="127.0.0.1:1",
                       mysql_secret_arn=db["ARN"], mysql_proxy_host="proxy.internal",
                       couchbase_secret_arn=cb["ARN"], spill_bucket="spill")


@pytest.fixture
def secrets_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ARNs of the secrets fetched from Secrets Manager, in order (a read from the cache is none)."""
    read: list[str] = []
    make_client = boto3.client

    def recording(*args: Any, **kwargs: Any) -> Any:
        client = make_client(*args, **kwargs)
        client.meta.events.register("before-parameter-build.secretsmanager.GetSecretValue",
                                    lambda params, **_: read.append(params["SecretId"]))
        return client

    monkeypatch.setattr(boto3, "client", recording)
    return read


def test_each_connection_reads_its_own_secret(aws_settings: Settings, secrets_read: list[str]):
    endpoints = AwsEndpoints(aws_settings)
    assert endpoints.kafka_config()["sasl.mechanism"] == "OAUTHBEARER" and secrets_read == []
    assert endpoints.mysql_target() == MysqlTarget.parse("mysql://blackbox:s3cret@proxy.internal:3306/blackbox")
    assert secrets_read == [aws_settings.mysql_secret_arn]
    assert endpoints.couchbase_credentials() == ("cb-user", "cb-pass")
    assert secrets_read == [aws_settings.mysql_secret_arn, aws_settings.couchbase_secret_arn]


def rotate(settings: Settings, password: str) -> None:
    """What RDS's rotation leaves in the MySQL secret: the same user, a new password (AWSCURRENT)."""
    boto3.client("secretsmanager", region_name=settings.aws_region).put_secret_value(
        SecretId=settings.mysql_secret_arn, SecretString=json.dumps(MYSQL_SECRET | {"password": password}))


def test_a_secret_comes_from_the_cache_within_its_age_unless_fetched_afresh(aws_settings: Settings,
                                                                             secrets_read: list[str]):
    """A container keeps the password it read through a rotation, until MySQL refuses it: then
    adapters.mysql.database asks with force, and the new one is what later connections use."""
    endpoints, arn = AwsEndpoints(aws_settings), aws_settings.mysql_secret_arn
    assert endpoints.mysql_target().password == "s3cret"
    rotate(aws_settings, "rotated")
    assert endpoints.mysql_target().password == "s3cret" and secrets_read == [arn]
    assert endpoints.mysql_target(force=True).password == "rotated" and secrets_read == [arn, arn]
    assert endpoints.mysql_target().password == "rotated" and secrets_read == [arn, arn]


def test_a_secret_older_than_its_age_is_read_again(aws_settings: Settings, secrets_read: list[str],
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(aws, "SECRET_MAX_AGE_S", 1)
    endpoints, arn = AwsEndpoints(aws_settings), aws_settings.mysql_secret_arn
    assert endpoints.mysql_target().password == "s3cret"
    rotate(aws_settings, "rotated")
    time.sleep(1.1)
    assert endpoints.mysql_target().password == "rotated" and secrets_read == [arn, arn]


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


# --- every function's ports, built from the environment the stacks give it ---------------------

ACCOUNT = "123456789012"  # moto's
# where a deployed function's stores are, here: MSK away (a closed port), MySQL and Couchbase the
# local engines (scripts/services) behind secrets in moto, the buckets in moto
ENGINE_SUBSTITUTES = {
    "BLACKBOX_KAFKA_BOOTSTRAP": "127.0.0.1:1",
    "BLACKBOX_MYSQL_PROXY_HOST": "127.0.0.1",
    "BLACKBOX_SERVER_KEY_IDS": "server-key-id",
    "BLACKBOX_KEY_SKUS": "title-key-id",
}


@pytest.fixture(scope="module")
def deployed_environments() -> dict[str, dict[str, Any]]:
    """Each adapter function's environment as the dev stacks set it (CloudFormation values unresolved)."""
    names = {f"{module}.handler": name for name, module in FUNCTIONS.items()}
    _, built = blackbox()
    environments: dict[str, dict[str, Any]] = {}
    for stack in built.stacks:
        for resource in Template.from_stack(stack).find_resources("AWS::Lambda::Function").values():
            properties = resource["Properties"]
            if properties.get("Handler") in names:
                environments[names[properties["Handler"]]] = properties["Environment"]["Variables"]
    return environments


def resolve(name: str, value: Any, substitutes: dict[str, str], region: str) -> str:
    """A CloudFormation value as deployed: pseudo parameters and joins resolved, a reference to a
    resource replaced by this test's stand-in for the variable."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(resolve(name, part, substitutes, region) for part in parts)
    pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": region, "AWS::URLSuffix": "amazonaws.com",
              "AWS::Partition": "aws"}
    if value.get("Ref") in pseudo:
        return pseudo[value["Ref"]]
    assert name in substitutes, f"{name} refers to {value}: give the test a stand-in for it"
    return substitutes[name]


# a read through each port; the log is only built (MSK is away here)
PROBES: dict[str, Callable[[Adapters], object]] = {
    "log": lambda a: a.log,
    "spill": lambda a: a.spill.list(1),
    "index": lambda a: a.index.ping(),
    "counters": lambda a: a.counters.session_counts("none", 0, 60_000, 60_000),
    "ranking": lambda a: a.ranking.get_board("none"),
    "documents": lambda a: a.documents.ping(),
    "projects": lambda a: a.projects.get(1),
    "issues": lambda a: a.issues.webhooks(),
    "symbols": lambda a: a.symbols.local(["game.pdb/0123/game.sym"]),
}


@pytest.mark.services
def test_every_function_builds_its_ports_from_the_environment_the_stacks_give_it(
        deployed_environments: dict[str, dict[str, Any]], static_credentials, secrets_read: list[str],
        monkeypatch: pytest.MonkeyPatch):
    """The variables the stacks set are the ones the aws profile reads, in the form it reads them:
    each function builds exactly its ports from them, reads exactly its ports' secrets, and each
    store answers (MySQL over TLS verified as in AWS, against the local CA)."""
    assert sorted(deployed_environments) == sorted(FUNCTION_PORTS)
    engines = services_settings()
    mysql = MysqlTarget.parse(engines.mysql_url)
    if mysql.ca_file:  # the aws profile verifies RDS Proxy against the system trust store
        monkeypatch.setenv("SSL_CERT_FILE", mysql.ca_file)
    region = deployed_environments["capture"]["BLACKBOX_AWS_REGION"]
    database = namespace()
    with mysql_database(database), mock_aws():
        secrets = boto3.client("secretsmanager", region_name=region)
        db = secrets.create_secret(Name="db", SecretString=json.dumps({
            "username": mysql.user, "password": mysql.password, "host": "rds.internal", "port": mysql.port,
            "dbname": database}))
        cb = secrets.create_secret(Name="cb", SecretString=json.dumps(
            {"username": engines.couchbase_username, "password": engines.couchbase_password}))
        substitutes = ENGINE_SUBSTITUTES | {"BLACKBOX_MYSQL_SECRET_ARN": db["ARN"],
                                            "BLACKBOX_COUCHBASE_SECRET_ARN": cb["ARN"]}
        for name, ports in sorted(FUNCTION_PORTS.items()):
            for variable in [v for v in os.environ if v.startswith("BLACKBOX_")]:
                monkeypatch.delenv(variable)
            for variable, value in deployed_environments[name].items():
                monkeypatch.setenv(variable, resolve(variable, value, substitutes, region))
            if "BLACKBOX_COUCHBASE_URL" in os.environ:  # the nodes' private DNS name: the local mock instead
                monkeypatch.setenv("BLACKBOX_COUCHBASE_URL", engines.couchbase_url)
            for variable in ("BLACKBOX_SPILL_BUCKET", "BLACKBOX_FAILED_BATCHES_BUCKET", "BLACKBOX_SYMBOLS_BUCKET"):
                if variable in os.environ:
                    boto3.client("s3", region_name=region).create_bucket(Bucket=os.environ[variable])
            secrets_read.clear()
            # every variable the stacks set is one the settings read (an unknown one is ignored)
            read = {f"BLACKBOX_{field.upper()}" for field in Settings.model_fields}
            assert {v for v in deployed_environments[name] if v.startswith("BLACKBOX_")} <= read, name
            settings = Settings(_env_file=None)  # type: ignore[call-arg]
            assert settings.profile == "aws", name
            adapters = build(settings)
            try:
                for port in sorted(ports):
                    PROBES[port](adapters)
                assert sorted(adapters.built) == sorted(ports), name
                expected = [db["ARN"]] * bool(ports & SQL_PORTS) + [cb["ARN"]] * (
                    "documents" in ports)
                assert sorted(secrets_read) == sorted(expected), name
            finally:
                adapters.close()
