"""Custom-resource handlers run by CloudFormation on deploy (the CDK Provider framework): create
the Kafka topics through the admin API, and apply the MySQL schema migrations. Both are
idempotent, so an update or a retried deploy re-runs them safely; deleting the stack keeps
topics and tables (they hold data)."""

from __future__ import annotations

from typing import Any

from adapters.factory import migrate
from adapters.kafka.auth import msk_iam, plaintext
from adapters.kafka.log import provision_topics
from adapters.settings import Settings
from ports.telemetry import instrumented, logger


@instrumented
def create_topics(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    settings = Settings()
    if event["RequestType"] != "Delete":
        properties = event["ResourceProperties"]
        partitions = int(properties["Partitions"])
        config = (msk_iam(settings.kafka_bootstrap, settings.aws_region) if settings.profile == "aws"
                  else plaintext(settings.kafka_bootstrap))
        # the admin client alone: this role may create topics, not produce to them
        days = {name: int(kept) for name, kept in properties["RetentionDays"].items()}
        provision_topics(config, days, partitions)
        logger.info("topics ready", extra={"retentionDays": days, "partitions": partitions})
    return {"PhysicalResourceId": f"topics:{settings.kafka_topic_prefix}"}


@instrumented
def migrate_schema(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    settings = Settings()
    if event["RequestType"] != "Delete":
        logger.info("migrations applied", extra={"applied": migrate(settings)})
    return {"PhysicalResourceId": "schema"}
