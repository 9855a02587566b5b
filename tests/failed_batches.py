"""Failed batches as Lambda writes them to an S3 on-failure destination, in a moto bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.failed_batches import S3FailedBatches
from pipeline.msk import to_msk_event
from ports import LogRecord

PREFIX = "blackbox-dev."
BUCKET = "blackbox-dev-failed-batches"
REGION = "eu-west-1"


def failed_batch(records: list[LogRecord], *, prefix: str = PREFIX, payload: bool = True) -> bytes:
    """The object Lambda writes to an S3 on-failure destination for a Kafka batch, as documented
    (https://docs.aws.amazon.com/lambda/latest/dg/kafka-on-failure.html): the batch's metadata and,
    as an escaped JSON string, the event the function was given. The cluster's topic names carry
    the deployment's prefix."""
    named = [replace(r, topic=prefix + r.topic) for r in records]
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/blackbox-dev/751d2973-a626-431c-9d4e-d7975eb44dd7-2"
    ranges: dict[str, list[LogRecord]] = {}
    for r in named:
        ranges.setdefault(f"{r.topic}-{r.partition}", []).append(r)
    document: dict[str, Any] = {
        "requestContext": {"requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81",
                           "functionArn": "arn:aws:lambda:eu-west-1:123456789012:function:blackbox-dev-session-counter",
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 11},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-11-14T00:38:06.021Z",
        "KafkaBatchInfo": {
            "batchSize": len(named), "eventSourceArn": arn, "bootstrapServers": "b-1.example:9098", "payloadSize": 2039,
            "recordsInfo": {tp: {"firstRecordOffset": str(rs[0].offset), "lastRecordOffset": str(rs[-1].offset),
                                 "firstRecordTimestamp": "2026-11-14T00:38:04.835Z",
                                 "lastRecordTimestamp": "2026-11-14T00:38:05.580Z"} for tp, rs in ranges.items()},
        },
    }
    if payload:
        document["payload"] = json.dumps(to_msk_event(named, arn, "b-1.example:9098"))
    return json.dumps(document).encode()


@contextmanager
def moto_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3FailedBatches]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield S3FailedBatches(client, BUCKET)


def put(store: S3FailedBatches, key: str, body: bytes) -> None:
    store._s3.put_object(Bucket=BUCKET, Key=key, Body=body)
