"""A native reporter's upload, captured as Blackbox's own: its crash report through the crash
capture (durable before the answer, idempotent by the client's event id) and its sessions through
the session capture."""

from __future__ import annotations

import hashlib

from pydantic import ValidationError

from crashes.capture import capture_crash
from crashes.model import CrashSubmission
from ports import EventLog, SpillStore
from ports.errors import InvalidField, PayloadTooLarge
from ports.limits import MAX_BODY_BYTES
from ports.scopes import ANY_SKU, SkuScope
from reporters.sentry import SentryEnvelope
from sessions.capture import capture_counts
from sessions.model import MAX_BATCH as MAX_SESSIONS
from sessions.model import SessionCount


def capture_envelope(log: EventLog, spill: SpillStore, reading: SentryEnvelope, sku: str, *, size_bytes: int,
                     scope: SkuScope = ANY_SKU) -> str | None:
    """Captures what an envelope carried for `sku`; the Sentry event id of its crash report, if any.
    `size_bytes`: the upload's size as sent."""
    scope.check([sku])
    opened = sorted(s.sid for s in reading.sessions if s.init)
    aggregated = sum(a.total for a in reading.aggregates)
    # refused before anything is published: a 400 must mean nothing of the upload was kept
    if len(opened) + aggregated > MAX_SESSIONS:
        raise InvalidField(f"an upload starts at most {MAX_SESSIONS} sessions, as /v1/sessions takes them; this one "
                           f"{len(opened) + aggregated}", "sessions")
    event_id = None
    if reading.crash is not None:
        text = reading.crash.json_text()
        # the report goes on the log as one record, attachments in base64, like a posted one
        if len(text) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"the report with its attachments in base64 is {len(text)} bytes; "
                                  f"the limit is {MAX_BODY_BYTES}")
        try:
            submission = CrashSubmission.model_validate_json(text)
        except ValidationError as error:  # reporters.sentry holds the fields to the model's bounds
            raise InvalidField(f"the event makes no crash report: {error.errors()[0]['msg']}") from None
        # an SDK sends the same event id again when it retries
        receipt = capture_crash(log, spill, submission, text, size_bytes=size_bytes,
                                idempotency_key=reading.crash.event_id, scope=scope)
        # Sentry's form of an id (32 hex digits): the client's own, else the one given here
        event_id = reading.crash.event_id or receipt.event_id.replace("-", "")
    _capture_sessions(log, spill, sku, opened=opened, aggregated=aggregated, scope=scope)
    return event_id


def _capture_sessions(log: EventLog, spill: SpillStore, sku: str, *, opened: list[str], aggregated: int,
                      scope: SkuScope) -> None:
    """`opened`: the sids of the sessions the upload opens; `aggregated`: its aggregates' sessions."""
    if opened:
        # a session is opened once: the same sids are the same upload, sent again
        again = hashlib.sha256("\x00".join(opened).encode()).hexdigest()
        capture_counts(log, spill, [SessionCount(sku=sku, kind="client", count=len(opened))],
                       idempotency_key=f"sentry-sessions:{again}", scope=scope)
    if aggregated:
        # two servers' aggregates may be alike to the byte: nothing tells a retry from another, and
        # they are counted each time they come (as Relay does)
        capture_counts(log, spill, [SessionCount(sku=sku, kind="client", count=aggregated)], scope=scope)
