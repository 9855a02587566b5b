"""Spill to S3 (the deployment's spill bucket, with a lifecycle rule for retention)."""

from __future__ import annotations

from typing import Any

from adapters.spill.codec import decode, encode, new_spill_id, spilled_at_ms
from ports import OutgoingRecord, SpilledRecord

PREFIX = "spill/"


class S3SpillStore:
    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def put(self, topic: str, record: OutgoingRecord) -> None:
        self._s3.put_object(Bucket=self._bucket, Key=f"{PREFIX}{new_spill_id(topic)}.json", Body=encode(topic, record))

    def list(self, limit: int) -> list[SpilledRecord]:
        # S3 lists keys in ascending order, and ids start with the time
        listing = self._s3.list_objects_v2(Bucket=self._bucket, Prefix=PREFIX, MaxKeys=limit)
        spilled = []
        for item in listing.get("Contents", []):
            body = self._s3.get_object(Bucket=self._bucket, Key=item["Key"])["Body"].read()
            spilled.append(decode(item["Key"].removeprefix(PREFIX).removesuffix(".json"), body))
        return spilled

    def delete(self, spill_id: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=f"{PREFIX}{spill_id}.json")

    def purge(self, before_ms: int) -> int:
        """The bucket's lifecycle rule expires spill too; this makes the cut exact and immediate."""
        purged = 0
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=PREFIX):
            old = [item["Key"] for item in page.get("Contents", [])
                   if spilled_at_ms(item["Key"].removeprefix(PREFIX)) < before_ms]
            if old:
                self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in old]})
                purged += len(old)
            if len(old) < len(page.get("Contents", [])):
                break  # keys sort by time: the rest are newer
        return purged
