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
from pipeline.topics import ALL_TOPICS, DEADLETTER
from ports.telemetry import logger


def create_topics(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    settings = Settings()
    if event["RequestType"] != "Delete":
        partitions = int(event["ResourceProperties"]["Partitions"])
        config = (msk_iam(settings.kafka_bootstrap, settings.aws_region) if settings.profile == "aws"
                  else plaintext(settings.kafka_bootstrap))
        # the admin client alone: this role may create topics, not produce to them. Dead letters are
        # kept as long as the data (they wait for someone to read and replay them), the rest as
        # long as the log
        days = {settings.kafka_topic_prefix + topic:
                settings.retention_days if topic == DEADLETTER else settings.log_retention_days for topic in ALL_TOPICS}
        provision_topics(config, days, partitions)
        logger.info("topics ready", extra={"topics": ALL_TOPICS, "partitions": partitions})
    return {"PhysicalResourceId": f"topics:{settings.kafka_topic_prefix}"}


def migrate_schema(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    settings = Settings()
    if event["RequestType"] != "Delete":
        logger.info("migrations applied", extra={"applied": migrate(settings)})
    return {"PhysicalResourceId": "schema"}
