"""The failed-batch bucket: one object per batch an MSK event source mapping gave up on, written
there by Lambda (its S3 on-failure destination) and read back by the scheduled replay (pipeline.replay)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3

if TYPE_CHECKING:
    from adapters.settings import Settings


class S3FailedBatches:
    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def keys(self) -> list[str]:
        """Every object's key, listed once: those left in place are not met again in the same run."""
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def read(self, key: str) -> bytes:
        body: bytes = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        return body

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=key)


def failed_batches(settings: Settings) -> S3FailedBatches | None:
    """The deployment's bucket; None without one (on one machine, where no event source mapping runs)."""
    if not settings.failed_batches_bucket:
        return None
    return S3FailedBatches(boto3.client("s3", region_name=settings.aws_region), settings.failed_batches_bucket)
