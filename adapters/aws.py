"""What the Lambda functions need in AWS, from their environment and Secrets Manager: read once
per container (the adapters are built once and reused across invocations)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from adapters.kafka.auth import msk_iam


@dataclass(frozen=True)
class AwsConnections:
    kafka_config: dict[str, Any]
    mysql_url: str
    couchbase_username: str
    couchbase_password: str


def read_secret(client: Any, arn: str) -> dict[str, Any]:
    secret: dict[str, Any] = json.loads(client.get_secret_value(SecretId=arn)["SecretString"])
    return secret


def mysql_url(secret: dict[str, Any], proxy_host: str | None) -> str:
    """From an RDS-format secret (username, password, host, port, dbname); the functions connect
    through RDS Proxy, whose endpoint replaces the instance host."""
    user, password = quote(secret["username"], safe=""), quote(secret["password"], safe="")
    host = proxy_host or secret["host"]
    return f"mysql://{user}:{password}@{host}:{secret.get('port', 3306)}/{secret.get('dbname', 'blackbox')}"


def resolve(
    secrets_client: Any, *, region: str, kafka_bootstrap: str, mysql_secret_arn: str, mysql_proxy_host: str | None,
    couchbase_secret_arn: str,
) -> AwsConnections:
    database = read_secret(secrets_client, mysql_secret_arn)
    couchbase = read_secret(secrets_client, couchbase_secret_arn)
    return AwsConnections(
        kafka_config=msk_iam(kafka_bootstrap, region),
        mysql_url=mysql_url(database, mysql_proxy_host),
        couchbase_username=couchbase["username"],
        couchbase_password=couchbase["password"],
    )
