"""One spilled record as a small JSON document, the same in a directory and in S3. Ids sort by
time, so listing gives the oldest first."""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid

import pybase64

from ports import OutgoingRecord, SpilledRecord

# orders the spills of one process made within the same nanosecond
_SEQUENCE = itertools.count()


def new_spill_id(topic: str) -> str:
    return f"{time.time_ns():020d}-{next(_SEQUENCE):09d}-{topic}-{uuid.uuid4().hex[:12]}"


_SPILL_ID = re.compile(r"\d{20}-\d{9}-[a-z]+-[0-9a-f]{12}")


def is_spill_id(name: str) -> bool:
    """Whether a file's (an object's) name is one new_spill_id made: the store lists and purges those alone."""
    return _SPILL_ID.fullmatch(name) is not None


def spilled_at_ms(spill_id: str) -> int:
    return int(spill_id.split("-", 1)[0]) // 1_000_000


def encode(topic: str, record: OutgoingRecord) -> bytes:
    def b64(data: bytes) -> str:
        return pybase64.b64encode(data).decode()

    return json.dumps({
        "topic": topic,
        "key": None if record.key is None else b64(record.key),
        "value": b64(record.value),
        "headers": [[name, b64(value)] for name, value in record.headers],
    }).encode()


class Unreadable(ValueError):
    """A spilled file (object) that does not decode: not written whole by a store, or damaged."""


def decode(spill_id: str, data: bytes) -> SpilledRecord:
    try:
        return _decode(spill_id, data)
    except (ValueError, KeyError, TypeError) as exc:  # JSON's, base64's (binascii.Error), a field's
        raise Unreadable(f"{spill_id}: {exc!r}") from exc


def _decode(spill_id: str, data: bytes) -> SpilledRecord:
    doc = json.loads(data)
    record = OutgoingRecord(
        value=pybase64.b64decode(doc["value"]),
        key=None if doc["key"] is None else pybase64.b64decode(doc["key"]),
        headers=tuple((name, pybase64.b64decode(value)) for name, value in doc["headers"]),
    )
    return SpilledRecord(spill_id, doc["topic"], record)
