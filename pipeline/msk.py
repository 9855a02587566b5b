"""The MSK event shape Lambda's Kafka event source mapping delivers, both ways: handlers read it,
the local runtime's poller writes it (records keyed `topic-partition`, base64 key and value,
headers as byte arrays). The event names topics as the cluster does, with the deployment's prefix
(BLACKBOX_KAFKA_TOPIC_PREFIX); records name them as the event log does, without it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pybase64
from aws_lambda_powertools.utilities.data_classes import KafkaEvent

from ports import LogRecord
from ports.telemetry import CORRELATION_HEADER, logger


def from_msk_event(event: dict[str, Any], topic_prefix: str = "") -> list[LogRecord]:
    """A record without a value (a tombstone) or a header without one reads as empty: never one of
    ours, it goes to the dead letters alone, as what its consumer cannot read does (rule 8)."""
    records = [
        LogRecord(
            topic=r.topic.removeprefix(topic_prefix),
            partition=r.partition,
            offset=r.offset,
            # pybase64 rather than Powertools' decoded_value: 100 KB values make base64 a hot path
            value=pybase64.b64decode(r.raw_event.get("value") or ""),
            key=None if r.key is None else pybase64.b64decode(r.key),
            # Java's signed bytes, as Lambda sends them (-61 is 0xC3)
            headers=tuple((k, bytes(b & 0xFF for b in v or ())) for h in r.headers for k, v in h.items()),
            timestamp_ms=r.timestamp,
        )
        for r in KafkaEvent(event).records
    ]
    if logger.log_level <= logging.DEBUG:  # a sampled invocation (POWERTOOLS_LOGGER_SAMPLE_RATE) or a hunt
        logger.debug("batch", extra={"records": len(records), "correlationIds": correlation_ids(records)})
    return records


def correlation_ids(records: Sequence[LogRecord]) -> list[str]:
    """The requests that sent these records, each once, in order: grep the API's log for them."""
    ids = (dict(r.headers).get(CORRELATION_HEADER) for r in records)
    return list(dict.fromkeys(i.decode("utf-8", "replace") for i in ids if i is not None))


def to_msk_event(records: Sequence[LogRecord], source_arn: str, bootstrap_servers: str,
                 topic_prefix: str = "") -> dict[str, Any]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        topic = topic_prefix + r.topic
        item: dict[str, Any] = {
            "topic": topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp_ms,
            "timestampType": "CREATE_TIME",
            "value": pybase64.b64encode(r.value).decode(),
            "headers": [{k: [b - 256 if b > 127 else b for b in v]} for k, v in r.headers],  # signed, as Lambda's
        }
        if r.key is not None:
            item["key"] = pybase64.b64encode(r.key).decode()
        grouped.setdefault(f"{topic}-{r.partition}", []).append(item)
    return {
        "eventSource": "aws:kafka",
        "eventSourceArn": source_arn,
        "bootstrapServers": bootstrap_servers,
        "records": grouped,
    }
