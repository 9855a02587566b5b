"""What a crash report is, as submitted and as carried on the log."""

from __future__ import annotations

import binascii
import hashlib
import json
from typing import Annotated, Any

import pybase64
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, WithJsonSchema

from pipeline.idempotency import body_hash
from ports.limits import AttachmentName, Identifier, Int64, Sku

# the index stores these in VARCHAR(256): longer ones are refused at capture, not left to fail a batch
MAX_INDEXED_CHARS = 256
Indexed = Annotated[str, StringConstraints(max_length=MAX_INDEXED_CHARS)]
# each attachment is a document of its own: 98,000 tiny ones in one report were 98,000 writes
MAX_ATTACHMENTS = 64
# a minidump starts with its signature and the low half of its version (MINIDUMP_VERSION, 0xA793),
# little-endian or, written on a big-endian machine, not
MINIDUMP_HEADERS = (b"MDMP\x93\xa7", b"PMDM\x00\x00\xa7\x93")


def is_minidump(data: bytes) -> bool:
    """What the processor walks: the reporters take a dump as one by the same test, so that none
    they take waits unwalked for good."""
    return data.startswith(MINIDUMP_HEADERS)


def decode_attachment(data: str) -> bytes:
    """Strict standard base64, canonical so that re-encoding gives back exactly what was sent."""
    # pybase64 (SIMD): the standard library's base64 was half of capture's CPU for 100 KB reports
    try:
        raw = pybase64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not valid base64") from None
    if pybase64.b64encode(raw).decode() != data:
        raise ValueError("not canonical base64 (padding or trailing bits)")
    return raw


def _checked_base64(data: str) -> str:
    decode_attachment(data)
    return data


Attachment = Annotated[str, AfterValidator(_checked_base64)]
# pydantic writes a key's pattern as patternProperties, which let any other name through: the
# document says what is checked, every name by the pattern and every value base64
Attachments = Annotated[dict[AttachmentName, Attachment], Field(max_length=MAX_ATTACHMENTS), WithJsonSchema({
    "type": "object", "maxProperties": MAX_ATTACHMENTS, "propertyNames": TypeAdapter(AttachmentName).json_schema(),
    "additionalProperties": {"type": "string", "format": "byte"},
    "description": "file name → canonical base64; each stored as a document of its own"})]


class CrashSubmission(BaseModel):
    """Validates the known fields; the stored payload is the submitted object itself."""

    model_config = ConfigDict(extra="allow", strict=True)

    sku: Sku
    crashType: Indexed | None = None
    errorCode: Indexed | Int64 | None = None
    platform: Indexed | None = None
    buildVersion: Indexed | None = None
    playerId: Identifier | None = None
    sessionId: Identifier | None = None
    clientTime: Annotated[str, StringConstraints(max_length=64)] | Int64 | None = None
    stackTrace: str | None = None
    attachments: Attachments | None = None


def report_key(event_id: str) -> str:
    """First 16 bytes of SHA-256(eventId), hex: the document key (paper §6.1.1)."""
    return hashlib.sha256(event_id.encode()).digest()[:16].hex()


def attachment_key(report: str, name: str) -> str:
    """Attachments live apart from the report body; names are hashed so any name makes a valid key."""
    return f"{report}:{hashlib.sha256(name.encode()).hexdigest()[:16]}"


class CrashEnvelope(BaseModel):
    """The value of a record on the crashes topic."""

    model_config = ConfigDict(strict=True)

    eventId: str
    reportKey: str
    receivedAt: int
    sizeBytes: int
    bodyHash: str | None = None
    payload: dict[str, Any]


def envelope_value(event_id: str, key: str, received_at: int, payload_json: bytes) -> bytes:
    """A CrashEnvelope around the submitted JSON text as it is: re-serialising 100 KB of parsed
    payload took more of capture's time than parsing it. The text was parsed strictly (as the
    consumer parses it), so the consumer reads back the same payload."""
    head = json.dumps({"eventId": event_id, "reportKey": key, "receivedAt": received_at, "sizeBytes": len(payload_json),
                       "bodyHash": body_hash(event_id, payload_json)})
    return b"".join((head[:-1].encode(), b', "payload": ', payload_json, b"}"))


class ReportDocument(BaseModel):
    """The report body in the document store: the payload as submitted, but for the attachment
    data, which is stored apart; each attachment's value here is null (names and key order stay)."""

    model_config = ConfigDict(strict=True)

    eventId: str
    reportKey: str
    receivedAt: int
    payload: dict[str, Any]
