"""Secrets Manager's rotation function for the Couchbase application user's secret: each of its
four steps (createSecret, setSecret, testSecret, finishSecret) for one version of the secret
(adapters.couchbase.rotation)."""

from __future__ import annotations

from typing import Any

import boto3

from adapters.couchbase.rotation import Rotation
from adapters.settings import Settings
from ports.telemetry import instrumented, logger


@instrumented
def handler(event: dict[str, Any], _context: Any) -> None:
    settings = Settings()
    secrets = boto3.client("secretsmanager", region_name=settings.aws_region)
    Rotation(secrets, event["SecretId"], settings.couchbase_admin_secret_arn, settings.couchbase_rest_url).step(
        event["Step"], event["ClientRequestToken"])
    logger.info("rotation step done", extra={"step": event["Step"]})
