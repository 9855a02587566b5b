"""A native reporter's upload, captured as Blackbox's own: its crash report through the crash
capture (durable before the answer, idempotent by the client's event id) and its sessions through
the session capture."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import TypeAdapter, ValidationError

from crashes.capture import capture_crash
from crashes.model import CrashSubmission
from ports import EventLog, SpillStore
from ports.errors import InvalidField, PayloadTooLarge
from ports.limits import MAX_BODY_BYTES, MAX_ID_CHARS, PathSegment, check_json_values
from ports.releases import Outcome
from ports.scopes import ANY_SKU, SkuScope
from ports.telemetry import logger
from reporters.sentry import SentryEnvelope, SessionAggregate, SessionUpdate
from sessions.capture import capture_counts, capture_each
from sessions.model import MAX_BATCH as MAX_SESSIONS
from sessions.model import SessionCount

# the kind of the keys of Sentry sessions' ends (sessions.capture.capture_each)
SENTRY_SESSION_ENDS = "sentry-session-ends"


class Captured(NamedTuple):
    """An upload's crash report: the Sentry event id (the client's own, else one given here, in
    Sentry's form: 32 hex digits) and the report's eventId."""

    sentry_id: str
    event_id: str


def capture_envelope(log: EventLog, spill: SpillStore, reading: SentryEnvelope, sku: str, *,
                     scope: SkuScope = ANY_SKU) -> Captured | None:
    """Captures what an envelope carried for `sku`; its crash report's ids, if it had one."""
    scope.check([sku])
    # the kinds of which some were left out (a count of 0 is none)
    if discarded := +reading.discarded:
        # answered 200 as Relay does (an SDK would send them again otherwise), but not without a trace:
        # by type, the items not kept (unreadable, of a type not read, files without a crash)
        logger.info("envelope items not kept", extra={"sku": sku, "discarded": dict(discarded)})
    # refused before anything is published: a 400 must mean nothing of the upload was kept
    if reading.sessions_ended > MAX_SESSIONS:
        raise InvalidField(f"an upload ends at most {MAX_SESSIONS} sessions, as /v1/sessions takes them; this one "
                           f"{reading.sessions_ended}", "sessions")
    captured = None
    if reading.crash is not None:
        text = reading.crash.json_text()
        # the report goes on the log as one record, attachments in base64, like a posted one: the
        # reporters keep the files that fit (reporters.sentry.with_attachments), so only an event
        # too large on its own is refused
        if len(text) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"the report is {len(text)} bytes as JSON; the limit is {MAX_BODY_BYTES}")
        # the values /v1/crashes holds a body to, which each reader bounds in its parts but not in what
        # they make together (an Unreal context and the fields beside it); each reader holds its parts
        # to the report's depth as it reads them (a walk of the whole again cost more than its parse)
        check_json_values(text)
        try:
            submission = CrashSubmission.model_validate_json(text)
        except ValidationError as error:  # reporters.sentry holds the fields to the model's bounds
            raise InvalidField(f"the event makes no crash report: {error.errors()[0]['msg']}") from None
        # an SDK sends the same event id again when it retries
        receipt = capture_crash(log, spill, submission, text, idempotency_key=reading.crash.event_id, scope=scope)
        captured = Captured(reading.crash.event_id or receipt.event_id.replace("-", ""), receipt.event_id)
    _capture_sessions(log, spill, sku, ended=[s for s in reading.sessions if s.ended], aggregates=reading.aggregates,
                      scope=scope)
    return captured


def _capture_sessions(log: EventLog, spill: SpillStore, sku: str, *, ended: list[SessionUpdate],
                      aggregates: Sequence[SessionAggregate], scope: SkuScope) -> None:
    """`ended`: the updates that say how a session ended; `aggregates`: sessions by how they ended.
    A session counts once, as it ended (what /v1/sessions asks of a client): the updates of one still
    going (status ok: a native SDK sends one as the game starts) count nothing."""
    if ended:
        # its sid is its key, whatever upload (or how many times in one) its end comes in, among keys
        # of their own: not clients' Idempotency-Keys, nor the keys of openings when openings counted
        # (an end of one opened then is counted again, where the same key would have sent it to the
        # dead letters)
        first: dict[str, SessionUpdate] = {}
        for update in ended:
            first.setdefault(update.sid, update)
        capture_each(log, spill, [
            (sid, _counts(sku, Counter({(_build(s.release), _outcome(s), s.did): 1}))) for sid, s in first.items()],
            scope=scope, kind=SENTRY_SESSION_ENDS)
    if aggregates:
        # two servers' aggregates may be alike to the byte: nothing tells a retry from another, and
        # they are counted each time they come (as Relay does)
        by_outcome: Counter[tuple[str | None, Outcome, str | None]] = Counter()
        for a in aggregates:
            outcomes: tuple[tuple[Outcome, int], ...] = (
                ("ok", a.exited), ("errored", a.errored), ("abnormal", a.abnormal), ("crashed", a.crashed))
            for status, n in outcomes:
                by_outcome[(_build(a.release), status, a.did)] += n
        capture_counts(log, spill, _counts(sku, by_outcome), scope=scope)


def _counts(sku: str, sessions: Counter[tuple[str | None, Outcome, str | None]]) -> list[SessionCount]:
    """Sessions by build, outcome and player; those of no build as one count, the record sessions
    always had (release health counts builds only), so an upload of before keeps its body hash."""
    unbuilt = sum(n for (build, _, _), n in sessions.items() if build is None)
    return [*([SessionCount(sku=sku, kind="client", count=unbuilt)] if unbuilt else []), *(
        SessionCount(sku=sku, kind="client", count=n, buildVersion=build, status=status,
                     playerId=did if did is not None and len(did) <= MAX_ID_CHARS else None)
        for (build, status, did), n in sessions.items() if build is not None and n)]


_ROUTABLE: TypeAdapter[str] = TypeAdapter(PathSegment)


def _build(release: str | None) -> str | None:
    """A Sentry release as a build /v1/releases/{build} can name, else none."""
    try:
        return None if release is None else _ROUTABLE.validate_python(release)
    except ValidationError:
        return None


def _outcome(update: SessionUpdate) -> Outcome:
    """Sentry's session status in release health's words: an exited session with errors errored."""
    if update.status in ("crashed", "abnormal"):
        return update.status  # type: ignore[return-value]
    if update.status in ("errored", "unhandled") or update.errors > 0:
        return "errored"
    return "ok"
