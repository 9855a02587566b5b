"""Spill to S3 (the deployment's spill bucket, with a lifecycle rule for retention)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from adapters.spill.codec import Unreadable, decode, encode, is_spill_id, new_spill_id, spilled_at_ms
from ports import OutgoingRecord, SpilledRecord
from ports.telemetry import logger

PREFIX = "spill/"
# where objects are set aside for the operator: those under PREFIX that do not decode, those the
# log refuses (under PREFIX: the functions' roles reach no other key)
UNREADABLE = f"{PREFIX}unreadable/"
REFUSED = f"{PREFIX}refused/"


def _spill_id(key: str, prefix: str = PREFIX) -> str | None:
    name = key.removeprefix(prefix).removesuffix(".json")
    return name if key == f"{prefix}{name}.json" and is_spill_id(name) else None


class S3SpillStore:
    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def put(self, topic: str, record: OutgoingRecord) -> None:
        self._s3.put_object(Bucket=self._bucket, Key=f"{PREFIX}{new_spill_id(topic)}.json", Body=encode(topic, record))

    def list(self, limit: int) -> list[SpilledRecord]:
        # S3 lists keys in ascending order, and ids start with the time
        spilled: list[SpilledRecord] = []
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=PREFIX,
                                                                  PaginationConfig={"PageSize": limit})
        for item in (item for page in pages for item in page.get("Contents", [])):
            if len(spilled) == limit:
                break
            if (spill_id := _spill_id(item["Key"])) is None:
                continue
            try:
                body = self._s3.get_object(Bucket=self._bucket, Key=item["Key"])["Body"].read()
            except ClientError as error:
                if error.response["Error"]["Code"] != "NoSuchKey":
                    raise
                continue  # replayed by another run since the listing (or set aside)
            try:
                spilled.append(decode(spill_id, body))
            except Unreadable as exc:
                if (aside := self._aside(spill_id, UNREADABLE)) is not None:
                    logger.error("a spilled object does not decode; set aside", extra={"key": aside,
                                                                                       "error": str(exc)})
        return spilled

    def delete(self, spill_id: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=f"{PREFIX}{spill_id}.json")

    def set_aside(self, spill_id: str) -> bool:
        return self._aside(spill_id, REFUSED) is not None

    def _aside(self, spill_id: str, prefix: str) -> str | None:
        """Where the spill was set aside; None if another replay set it aside (or replayed it) meanwhile."""
        try:
            return self._set_aside(spill_id, prefix)
        except ClientError as error:
            if error.response["Error"]["Code"] != "NoSuchKey":
                raise
            return None

    def _set_aside(self, spill_id: str, prefix: str) -> str:
        """S3 has no rename: a copy, then the delete."""
        key, aside = f"{PREFIX}{spill_id}.json", f"{prefix}{spill_id}.json"
        self._s3.copy_object(Bucket=self._bucket, Key=aside, CopySource={"Bucket": self._bucket, "Key": key})
        self._s3.delete_object(Bucket=self._bucket, Key=key)
        return aside

    def purge(self, before_ms: int) -> int:
        """The bucket's lifecycle rule expires spill too; this makes the cut exact and immediate, of
        the spills and of those set aside."""
        purged = 0
        for prefix in (PREFIX, UNREADABLE, REFUSED):
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix)
            for page in pages:
                ids = [(item["Key"], spill_id) for item in page.get("Contents", [])
                       if (spill_id := _spill_id(item["Key"], prefix)) is not None]
                old = [key for key, spill_id in ids if spilled_at_ms(spill_id) < before_ms]
                if old:
                    self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in old]})
                    purged += len(old)
                if len(old) < len(ids):
                    break  # keys sort by time: the rest are newer
        return purged
