"""What the Lambda functions need in AWS, from their environment and Secrets Manager. A secret is
read only when the first port that needs it is built (adapters.factory builds each port once per
container): a function reads only the secrets of the ports it uses, and its role may read no other.
Secrets go through Powertools Parameters, cached for SECRET_MAX_AGE_S: MySQL asks again for each
new connection, and fetches afresh when the server refuses the cached password (a rotation)."""

from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

import boto3
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from adapters.kafka.auth import msk_iam
from adapters.spill.s3 import S3SpillStore
from adapters.symbols.s3 import S3SymbolStore

if TYPE_CHECKING:
    from adapters.mysql.database import MysqlTarget
    from adapters.settings import Settings
    from ports import SpillStore, SymbolStore

# how long a container trusts a secret it read: past it, the next new connection reads it again,
# so a rotated password is picked up without a refused connection first
SECRET_MAX_AGE_S = 300


def mysql_url(secret: dict[str, Any], proxy_host: str | None) -> str:
    """From an RDS-format secret (username, password, host, port, dbname); the functions connect
    through RDS Proxy, whose endpoint replaces the instance host. No CA bundle: the proxy's
    certificate is verified against the system trust store (adapters.mysql.database.tls_context)."""
    user, password = quote(secret["username"], safe=""), quote(secret["password"], safe="")
    host = proxy_host or secret["host"]
    return f"mysql://{user}:{password}@{host}:{secret.get('port', 3306)}/{secret.get('dbname', 'blackbox')}"


class AwsEndpoints:
    """The engines of the aws profile (adapters.factory.Endpoints): MSK with IAM auth, RDS Proxy and
    Couchbase with credentials from Secrets Manager, the S3 spill and symbols buckets. Every call
    reads what it needs then, and nothing before."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    @cached_property
    def _secrets(self) -> SecretsProvider:
        """Made when the first secret is read: capture reads none, and needs no client."""
        return SecretsProvider(boto3_client=boto3.client("secretsmanager", region_name=self._settings.aws_region))

    def _secret(self, arn: str, *, force: bool = False) -> dict[str, Any]:
        # an object's JSON (transform): a dict
        return cast("dict[str, Any]", self._secrets.get(arn, max_age=SECRET_MAX_AGE_S, transform="json",
                                                       force_fetch=force))

    def kafka_config(self) -> dict[str, Any]:
        return msk_iam(self._settings.kafka_bootstrap, self._settings.aws_region)

    def mysql_target(self, *, force: bool = False) -> MysqlTarget:
        """A TargetProvider (adapters.mysql.database) on the RDS secret, which RDS rotates."""
        from adapters.mysql.database import MysqlTarget  # noqa: PLC0415 — PyMySQL: only in a function on MySQL

        secret = self._secret(self._settings.mysql_secret_arn, force=force)
        return MysqlTarget.parse(mysql_url(secret, self._settings.mysql_proxy_host))

    def couchbase_credentials(self) -> tuple[str, str]:
        """Read once per container, when the document store is built: its rotation alternates two
        users (adapters.couchbase.rotation), so the credentials read stay valid until the rotation after."""
        secret = self._secret(self._settings.couchbase_secret_arn)
        return secret["username"], secret["password"]

    def spill(self) -> SpillStore:
        return S3SpillStore(boto3.client("s3", region_name=self._settings.aws_region), self._settings.spill_bucket)

    def symbols(self) -> SymbolStore:
        # the walker's copies: a container's /tmp, kept across its invocations
        return S3SymbolStore(boto3.client("s3", region_name=self._settings.aws_region),
                             self._settings.symbols_bucket, Path(tempfile.gettempdir()) / "blackbox-symbols")
