"""What the Lambda functions need in AWS, from their environment and Secrets Manager. A secret is
read only when the first port that needs it is built (adapters.factory builds each port once per
container): a function reads only the secrets of the ports it uses, and its role may read no other."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import boto3

from adapters.kafka.auth import msk_iam
from adapters.spill.s3 import S3SpillStore

if TYPE_CHECKING:
    from adapters.settings import Settings
    from ports import SpillStore


def read_secret(client: Any, arn: str) -> dict[str, Any]:
    secret: dict[str, Any] = json.loads(client.get_secret_value(SecretId=arn)["SecretString"])
    return secret


def mysql_url(secret: dict[str, Any], proxy_host: str | None) -> str:
    """From an RDS-format secret (username, password, host, port, dbname); the functions connect
    through RDS Proxy, whose endpoint replaces the instance host. No CA bundle: the proxy's
    certificate is verified against the system trust store (adapters.mysql.database.tls_context)."""
    user, password = quote(secret["username"], safe=""), quote(secret["password"], safe="")
    host = proxy_host or secret["host"]
    return f"mysql://{user}:{password}@{host}:{secret.get('port', 3306)}/{secret.get('dbname', 'blackbox')}"


class AwsEndpoints:
    """The engines of the aws profile (adapters.factory.Endpoints): MSK with IAM auth, RDS Proxy and
    Couchbase with credentials from Secrets Manager, the S3 spill bucket. Every call reads what it
    needs then, and nothing before."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _secret(self, arn: str) -> dict[str, Any]:
        return read_secret(boto3.client("secretsmanager", region_name=self._settings.aws_region), arn)

    def kafka_config(self) -> dict[str, Any]:
        return msk_iam(self._settings.kafka_bootstrap, self._settings.aws_region)

    def mysql_url(self) -> str:
        return mysql_url(self._secret(self._settings.mysql_secret_arn), self._settings.mysql_proxy_host)

    def couchbase_credentials(self) -> tuple[str, str]:
        secret = self._secret(self._settings.couchbase_secret_arn)
        return secret["username"], secret["password"]

    def spill(self) -> SpillStore:
        return S3SpillStore(boto3.client("s3", region_name=self._settings.aws_region), self._settings.spill_bucket)
