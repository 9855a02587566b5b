"""Sentry SDK traffic, read into Blackbox's crash reports and session updates.

A studio points any Sentry SDK (Unity, Unreal, native, Python…) at a DSN
`http(s)://<ingest key>@<host>/<projectId>` (`dsn()`); the SDK posts envelopes to
`/api/{projectId}/envelope/` and, if old, single events to `/api/{projectId}/store/`. This module
reads those bodies, after `reporters.encoding.decode_body` has undone `Content-Encoding`; it knows
no HTTP. Every refusal is a `reporters.errors.ReporterError` (400, 401, 413 with the contract's
codes), whatever the bytes: nothing else escapes.

**Authentication** (`parse_auth`), as Relay reads it: `X-Sentry-Auth: Sentry sentry_key=…,
sentry_version=7, sentry_client=…`, the same in `Authorization: Sentry …`, `Authorization: Basic`
with base64 of `key:`, or the query's `sentry_key=…` (with `sentry_version`, `sentry_client`).
None of them, or more than one, is 401. A `sentry_version` above 7 is 400, as Relay answers it.

**Envelopes** (`parse_envelope`), framed as Relay frames them (relay-server's envelope.rs): a
header line (a JSON object: `event_id`, `dsn`, `sent_at`…), then items, each a header line (a JSON
object with `type`; optional `length`, `content_type`, `filename`, `attachment_type`) and a payload:
exactly `length` bytes followed by a newline or the end, or without `length` everything up to the
next newline. Lines end with `\\n` alone; a header line ends with its object's `}`.

| bound | value | past it |
|---|---|---|
| decoded envelope | `MAX_ENVELOPE_BYTES` = 1 MiB (the JSON report's own limit) | 413 |
| one item's payload | `MAX_ITEM_BYTES` = 1 MiB | 413 |
| items in an envelope | `MAX_ITEMS` = 100 (an SDK sends a handful) | 400 |
| a header line | `MAX_HEADER_BYTES` = 64 KiB | 400 |
| `event` items | one (as Relay) | 400 |
| JSON | strict (UTF-8, no NaN; an escaped lone surrogate is U+FFFD), ≤ 32 levels (event 31), ≤ 131,072 values | 400 |

A `length` over an item's limit is 413, as a `Content-Length` over the body's is; within it, one longer
than what is left, or not followed by a newline, is 400 naming the item.

**Items.** `event` → one crash report (below). `attachment` → that report's attachments, the bytes
as sent; `attachment_type: event.minidump` ones are listed in `CrashReport.minidumps` and marked in
the payload's `sentryAttachments`, so processing finds them. Names are made safe for
`/attachments/{name}`: the file name's last path part, any character an attachment name cannot hold
replaced by `_`, at most 128 characters; a repeated name gets `-2`, `-3`… before its extension; no
name is `attachment` (`minidump.dmp` for a minidump). A report keeps at most
`crashes.model.MAX_ATTACHMENTS` (64), minidumps first, then in envelope order, each while the
report's JSON text (files in base64) fits the JSON report's limit (`with_attachments`); the rest
are counted in `discarded["attachment"]` and listed in `sentryAttachmentsLeftOut`. An envelope without an event
but with a minidump is still a report (an empty `sentryEvent`, its id from the envelope header);
attachments without either are discarded. `session` → a `SessionUpdate`, `sessions` →
`SessionAggregate`s; one that does not read (bad JSON, no `sid`, unknown `status`, no `started`) is
counted as discarded under its type. Every other type (`transaction`, `client_report`, `profile`,
`replay_event`, `check_in`, …) is counted in `discarded` by type (a name that is not short
snake_case as `unknown`), never an error (capture logs the counts).

**An event as a crash report** (the fields of `POST /v1/crashes`; `CrashReport.submission()`):

- `sku`: the caller's (a project maps to a sku).
- `crashType`: the last of `exception.values` (the one raised; those before it are its causes),
  its `type`. An event without an exception (a captured message) is a report too, its
  `crashType` the message's template, so that its variants list together: `logentry.message`,
  else `logentry.formatted`, else `message`, first line.
- `errorCode`: that exception's `mechanism.meta`: `signal.name` (`SIGSEGV`), else `signal.number`,
  else `mach_exception.name`, else its `exception` number, else `errno.name`, else `errno.number`.
  `mechanism.type` (`generic`, `onerror`) names the SDK's hook, not the crash, and is not used.
- `stackTrace`: the frames of that exception's `stacktrace`, else of the crashed thread, else of
  the current thread, else the event's `stacktrace`; innermost first (Sentry lists them outermost
  first), one a line as gdb writes them: `#0 0x7ff6a1b2c3d4 in Renderer.Draw at renderer.cpp:412`,
  the function as `module.function` when a module is given, `from <binary file name>` when there
  is no source file. `crashes.signature` drops index, address and line number, so the same bug
  groups across builds and machines.
- `platform`: `contexts.os.name`, else `platform` (the SDK's language: `native`, `csharp`…).
- `buildVersion`: `release`.
- `playerId`: `user.id` (a number as its digits); left out when it is not 1 to 128 characters.
- `clientTime`: `timestamp`, RFC 3339 text as sent (up to 64 characters), epoch seconds as epoch
  milliseconds.
- `sentryEvent`: the whole event as sent.
- `sentryAttachments`: `[{name, filename, attachmentType, contentType}]`, when there are any;
  `sentryAttachmentsLeftOut`: `[{filename, attachmentType, sizeBytes}]`, those not kept.
- `attachments`: name → base64 of the bytes.

Text fields past 256 characters (`crashType`, `errorCode`, `platform`, `buildVersion`) are cut to
256 rather than refused: a crash is never refused for an optional field, and neither is one left
out for a wrong type. The report's event id (`CrashReport.event_id`, 32 hex digits, for
idempotency: an SDK retries with the same one) is the envelope header's `event_id`, else the
event's; None when neither is a UUID. `/store/` (`parse_store`) takes one JSON event, ≤ 1 MiB.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pybase64
import pydantic_core
from pydantic import TypeAdapter, ValidationError

from crashes.model import MAX_ATTACHMENTS, MAX_INDEXED_CHARS
from ports.errors import InvalidField
from ports.limits import (
    INT64_MAX,
    INT64_MIN,
    MAX_BODY_BYTES,
    MAX_ID_CHARS,
    MAX_JSON_DEPTH,
    AttachmentName,
    JsonValues,
    TooManyJsonValues,
    check_json,
    cut,
)
from ports.timeutil import FIRST_MS, LAST_MS, parse_epoch_ms
from reporters.errors import ReporterError

MAX_ENVELOPE_BYTES = MAX_BODY_BYTES
MAX_ITEM_BYTES = MAX_BODY_BYTES
MAX_ITEMS = 100
MAX_HEADER_BYTES = 64 << 10
# what Sentry's SDKs speak today; Relay refuses a newer protocol rather than misread it
PROTOCOL_VERSION = 7
MAX_KEY_CHARS = 128
# the headers a Sentry SDK may authenticate with (or the query's sentry_key)
AUTH_HEADERS = ("x-sentry-auth", "authorization")
# the event is kept one level down in the report, whose JSON is held to MAX_JSON_DEPTH
EVENT_DEPTH = MAX_JSON_DEPTH - 1
MINIDUMP = "event.minidump"
# the item types read; every other one is counted as discarded, under its name when it looks like
# one (Sentry's are short snake_case) and as "unknown" otherwise, so a client cannot mint counter keys
_READ = frozenset({"event", "attachment", "session", "sessions"})
_TYPE_NAME = re.compile(r"[a-z][a-z0-9_.]{0,31}")
SESSION_STATUSES = frozenset({"ok", "exited", "crashed", "abnormal", "errored", "unhandled"})
# Relay reads session counts as u32
MAX_SESSION_COUNT = (1 << 32) - 1
_NAME_CHARS = frozenset("-._~()'!*:@,;=+&$%<> []{}|^")
_MAX_NAME_CHARS = 128
_ATTACHMENT_NAME: TypeAdapter[str] = TypeAdapter(AttachmentName)


@dataclass(frozen=True)
class EnvelopeLimits:
    max_bytes: int = MAX_ENVELOPE_BYTES
    max_item_bytes: int = MAX_ITEM_BYTES
    max_items: int = MAX_ITEMS
    max_header_bytes: int = MAX_HEADER_BYTES


LIMITS = EnvelopeLimits()


@dataclass(frozen=True)
class SentryAuth:
    key: str
    client: str | None
    version: int


@dataclass(frozen=True)
class Item:
    """One envelope item as framed: its header object and payload bytes."""

    headers: Mapping[str, Any]
    payload: bytes

    @property
    def type(self) -> str:
        kind: str = self.headers["type"]
        return kind

    def text(self, name: str) -> str | None:
        return text_value(self.headers.get(name))


@dataclass(frozen=True)
class CrashReport:
    """`fields` are the report's fields but its attachments, which are `attachments` as bytes."""

    event_id: str | None
    fields: dict[str, Any]
    attachments: dict[str, bytes]
    minidumps: tuple[str, ...] = ()

    def submission(self) -> dict[str, Any]:
        """The report as `POST /v1/crashes` takes it (for CrashSubmission): attachments in base64."""
        if not self.attachments:
            return dict(self.fields)
        return {**self.fields, "attachments": {name: pybase64.b64encode(data).decode()
                                               for name, data in self.attachments.items()}}

    def json_text(self) -> bytes:
        """`submission()` as JSON text, the same bytes for the same envelope (a retry's body hash
        matches). Its size is for the caller to hold to the JSON report's limit."""
        text = _compact(self.fields)
        if not self.attachments:
            return text
        # base64 needs no escaping: written as it is, not scanned again by json.dumps (a third of
        # an envelope's capture was that scan)
        files = b",".join(_compact(name) + b':"' + pybase64.b64encode(data) + b'"'
                          for name, data in self.attachments.items())
        return text[:-1] + (b"," if self.fields else b"") + b'"attachments":{' + files + b"}}"


@dataclass(frozen=True)
class SessionUpdate:
    """A `session` item (release health, one session's state). Times are epoch milliseconds."""

    sid: str
    status: str
    started_ms: int
    did: str | None = None
    timestamp_ms: int | None = None
    errors: int = 0
    release: str | None = None
    environment: str | None = None

    @property
    def ended(self) -> bool:
        """Whether the update says how the session ended: every status but `ok` (still going)."""
        return self.status != "ok"


@dataclass(frozen=True)
class SessionAggregate:
    """One bucket of a `sessions` item: sessions started in the minute of `started_ms`, by how they ended."""

    started_ms: int
    did: str | None = None
    exited: int = 0
    errored: int = 0
    abnormal: int = 0
    crashed: int = 0
    release: str | None = None
    environment: str | None = None

    @property
    def total(self) -> int:
        return self.exited + self.errored + self.abnormal + self.crashed


@dataclass(frozen=True)
class SentryEnvelope:
    """What one envelope (or store body) carried for Blackbox."""

    event_id: str | None = None
    dsn: str | None = None
    crash: CrashReport | None = None
    sessions: tuple[SessionUpdate, ...] = ()
    aggregates: tuple[SessionAggregate, ...] = ()
    discarded: Counter[str] = field(default_factory=Counter)

    @property
    def sessions_ended(self) -> int:
        """Sessions counted: those an update ends (by sid), and every session of the aggregates."""
        return len({s.sid for s in self.sessions if s.ended}) + sum(a.total for a in self.aggregates)


def dsn(scheme: str, key: str, host: str, project_id: int | str) -> str:
    """What a studio pastes into a Sentry SDK: `scheme://key@host/project_id` (`host` may carry a port)."""
    return f"{scheme}://{key}@{host}/{project_id}"


# --- authentication ---------------------------------------------------------------------------


def find_auth(headers: Mapping[str, Sequence[str]], query: Mapping[str, Sequence[str]]) -> SentryAuth | None:
    """The public key a request authenticates with, None when it gives none; `headers` (names in
    any case) and `query` each with all of their values. A key given twice, in one form or two, is
    401: which copy counts is one a proxy in front may read otherwise."""
    found: list[SentryAuth] = []
    for name, values in headers.items():
        if name.lower() in AUTH_HEADERS:
            found += [_auth_from_pairs(_header_pairs(value[7:])) for value in values if value[:7].lower() == "sentry "]
        if name.lower() == "authorization":
            found += [_auth_from_pairs([("sentry_key", key)]) for key in map(_basic_key, values) if key is not None]
    if any(name.startswith("sentry_") for name in query):
        found.append(_auth_from_pairs((name, value) for name, values in query.items() for value in values))
    if len(found) > 1:
        raise ReporterError("unauthorized", "more than one Sentry authentication", "X-Sentry-Auth")
    return found[0] if found else None


def parse_auth(headers: Mapping[str, Sequence[str]], query: Mapping[str, Sequence[str]]) -> SentryAuth:
    """find_auth, where a request must give a key."""
    auth = find_auth(headers, query)
    if auth is None:
        raise ReporterError("unauthorized", "no Sentry authentication (X-Sentry-Auth or sentry_key)", "X-Sentry-Auth")
    return auth


def _header_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if sep:
            pairs.append((name.strip(), value.strip()))
    return pairs


def _basic_key(value: str) -> str | None:
    """`Authorization: Basic base64(key:secret)`, as Relay takes it; anything else is no auth."""
    if value[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode()
    except (binascii.Error, ValueError):
        return None
    key, sep, _ = decoded.partition(":")
    return key if sep else None


def _auth_from_pairs(pairs: Iterable[tuple[str, str]]) -> SentryAuth:
    key: str | None = None
    client, version = None, PROTOCOL_VERSION
    for name, value in pairs:
        if name == "sentry_key":
            if key is not None:
                raise ReporterError("unauthorized", "sentry_key is given twice", "X-Sentry-Auth")
            key = value
        elif name == "sentry_client":
            client = value or None
        elif name == "sentry_version":
            major = value.partition(".")[0]
            if not (major.isascii() and major.isdigit() and len(major) <= 5):
                raise ReporterError("unauthorized", f"sentry_version {value[:16]!r} is no version", "X-Sentry-Auth")
            version = int(major)
    if not key:
        raise ReporterError("unauthorized", "sentry_key is missing", "X-Sentry-Auth")
    if len(key) > MAX_KEY_CHARS:
        raise ReporterError("unauthorized", f"sentry_key is over {MAX_KEY_CHARS} characters", "X-Sentry-Auth")
    return SentryAuth(key, client, version)


def check_protocol(auth: SentryAuth) -> None:
    """Refuses (400) a Sentry protocol newer than PROTOCOL_VERSION, as Relay refuses one rather than
    misread it. Not in `parse_auth`, which finds the key alone: in AWS a key source runs it before
    the handler, and would make that a 401 (the key refused)."""
    if auth.version > PROTOCOL_VERSION:
        raise ReporterError("invalid", f"Sentry protocol {auth.version} is not supported (at most "
                            f"{PROTOCOL_VERSION})", "X-Sentry-Auth")


# --- framing ----------------------------------------------------------------------------------


def split_envelope(data: bytes, limits: EnvelopeLimits = LIMITS,
                   values: JsonValues | None = None) -> tuple[dict[str, Any], list[Item]]:
    """An envelope's header and items, framed as Relay frames them, payloads not yet read; its
    header lines count among the JSON `values` of the envelope."""
    values = values or JsonValues()
    if len(data) > limits.max_bytes:
        raise ReporterError("too_large", f"the envelope is {len(data)} bytes; the limit is {limits.max_bytes}")
    header, offset = _header_line(data, 0, "the envelope header", limits, values)
    items: list[Item] = []
    while offset < len(data):
        if len(items) == limits.max_items:
            raise ReporterError("invalid", f"an envelope holds at most {limits.max_items} items")
        what = f"item {len(items)}"
        headers, start = _header_line(data, offset, f"{what}'s header", limits, values)
        if not isinstance(headers.get("type"), str) or not headers["type"]:
            raise ReporterError("invalid", f"{what}'s header has no type")
        end = _payload_end(data, start, headers.get("length"), what, limits)
        items.append(Item(headers, data[start:end]))
        offset = end + 1
    return header, items


def _header_line(data: bytes, offset: int, what: str, limits: EnvelopeLimits,
                 values: JsonValues) -> tuple[dict[str, Any], int]:
    """The JSON object on the line at `offset`, and where the next line starts (past the end of
    `data` when the line was the last)."""
    end = data.find(b"\n", offset, offset + limits.max_header_bytes + 1)
    if end < 0:
        end = len(data)
        if end - offset > limits.max_header_bytes:
            raise ReporterError("invalid", f"{what} is over {limits.max_header_bytes} bytes")
    line = data[offset:end]
    # Relay reads a header up to its closing brace and wants the newline right there
    header = _json(line, what, values) if line.endswith(b"}") else None
    if not isinstance(header, dict):
        raise ReporterError("invalid", f"{what} is not one line holding a JSON object")
    return header, end + 1


def _payload_end(data: bytes, start: int, length: Any, what: str, limits: EnvelopeLimits) -> int:
    start = min(start, len(data))
    if length is None:
        newline = data.find(b"\n", start)
        end = len(data) if newline < 0 else newline
    elif isinstance(length, int) and not isinstance(length, bool) and length >= 0:
        end = start + length
        if length <= limits.max_item_bytes and end > len(data):
            raise ReporterError("invalid", f"{what} says {length} bytes but {len(data) - start} are left")
        if end < len(data) and data[end] != 0x0A:
            raise ReporterError("invalid", f"{what}'s {length} bytes are not followed by a newline")
    else:
        raise ReporterError("invalid", f"{what}'s length is not a byte count")
    if end - start > limits.max_item_bytes:
        raise ReporterError("too_large", f"{what} is over {limits.max_item_bytes} bytes")
    return end


def event_object(data: bytes, what: str, values: JsonValues | None = None, depth: int = EVENT_DEPTH) -> dict[str, Any]:
    """JSON text that must be a Sentry event (or an object the report keeps `depth` from its last
    level): a JSON object, strict, within `depth`, its values counted among the body's `values`."""
    event = _json(data, what, values or JsonValues(), depth)
    if not isinstance(event, dict):
        raise ReporterError("invalid", f"{what} is not a JSON object")
    return event


class TooManyValues(ReporterError):
    """A body past its JSON values' bound: refused whole (400), never passed over as one bad item,
    whichever of its texts came to the bound."""


def _json(data: bytes, what: str, values: JsonValues, depth: int = MAX_JSON_DEPTH) -> Any:
    try:
        values.add(data)
    except TooManyJsonValues as exc:
        raise TooManyValues("invalid", f"{what}: {exc.message}") from None
    try:
        try:
            value = pydantic_core.from_json(data, allow_inf_nan=False)
        except ValueError:
            # a lone surrogate escaped: the strict parser refuses it, in words that depend on what
            # follows it ("lone leading surrogate", "unexpected end of hex escape")
            if _SURROGATE_ESCAPE.search(data) is None:
                raise
            value = _with_lone_surrogates(data)
        check_json(value, depth)
    except InvalidField as exc:
        raise ReporterError("invalid", f"{what}: {exc.message}") from None
    except ValueError as exc:
        raise ReporterError("invalid", f"{what} is not valid JSON: {exc}") from None
    return value


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    if (number := float(text)) in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return number


def _with_lone_surrogates(data: bytes) -> Any:
    """JSON whose strings escape lone surrogates (`"\\udcff"`), as Python's json.dumps writes the
    string of an undecodable file name: read as strictly otherwise, each one U+FFFD. Refusing it
    would lose the crash, since an SDK drops what is refused."""
    def whole(value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        if isinstance(value, list):
            return [whole(item) for item in value]
        if isinstance(value, dict):
            return {whole(key): whole(item) for key, item in value.items()}
        return value

    try:
        # decoded strictly first: json.loads would take a surrogate's own UTF-8 bytes (surrogatepass)
        return whole(json.loads(data.decode("utf-8"), parse_constant=_not_json, parse_float=_finite))
    except RecursionError:
        raise ValueError("nested too deeply") from None


# --- reading ----------------------------------------------------------------------------------


def parse_envelope(data: bytes, sku: str, limits: EnvelopeLimits = LIMITS) -> SentryEnvelope:
    """An envelope body (decoded) as the crash report, session updates and discarded item counts
    it carries for `sku`."""
    # one bound on the JSON values of its header lines and items together, as of one JSON body
    values = JsonValues()
    header, items = split_envelope(data, limits, values)
    discarded = Counter(_counted_as(item.type) for item in items if item.type not in _READ)
    sessions, aggregates = _release_health(items, discarded, values)
    events = [item for item in items if item.type == "event"]
    attachments = [item for item in items if item.type == "attachment"]
    if len(events) > 1:
        raise ReporterError("invalid", "an envelope holds at most one event")
    event_id = sentry_event_id(header.get("event_id"))
    crash = None
    if events:
        event = event_object(events[0].payload, "the event", values)
        crash = _report(event, sku, event_id or sentry_event_id(event.get("event_id")), attachments, discarded)
    elif any(item.text("attachment_type") == MINIDUMP for item in attachments):
        crash = _report({}, sku, event_id, attachments, discarded)
    elif attachments:
        discarded["attachment"] += len(attachments)
    return SentryEnvelope(event_id=event_id, dsn=text_value(header.get("dsn")), crash=crash, sessions=sessions,
                          aggregates=aggregates, discarded=discarded)


def _counted_as(kind: str) -> str:
    return kind if _TYPE_NAME.fullmatch(kind) else "unknown"


def _release_health(items: list[Item], discarded: Counter[str],
                    values: JsonValues) -> tuple[tuple[SessionUpdate, ...], tuple[SessionAggregate, ...]]:
    """The session and sessions items that read; those that do not are counted as discarded."""
    sessions: list[SessionUpdate] = []
    aggregates: list[SessionAggregate] = []
    for item in items:
        if item.type not in ("session", "sessions"):
            continue
        read = _session(item.payload, values) if item.type == "session" else _aggregates(item.payload, values)
        if read is None:
            discarded[item.type] += 1
        elif isinstance(read, SessionUpdate):
            sessions.append(read)
        else:
            aggregates.extend(read)
    return tuple(sessions), tuple(aggregates)


def parse_store(data: bytes, sku: str, limits: EnvelopeLimits = LIMITS) -> SentryEnvelope:
    """A `/store/` body: one JSON event."""
    if len(data) > limits.max_item_bytes:
        raise ReporterError("too_large", f"the event is {len(data)} bytes; the limit is {limits.max_item_bytes}")
    event = event_object(data, "the event")
    event_id = sentry_event_id(event.get("event_id"))
    return SentryEnvelope(event_id=event_id, crash=_report(event, sku, event_id, [], Counter()))


def sentry_event_id(value: Any) -> str | None:
    """A UUID in any of its spellings as Sentry's event id (32 hex digits); None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value).hex
    except ValueError:
        return None


def _report(event: dict[str, Any], sku: str, event_id: str | None, items: list[Item],
            discarded: Counter[str]) -> CrashReport:
    crash = with_attachments(event_id, submission_fields(event, sku), [
        Attached(item.text("filename"), item.text("attachment_type") or "event.attachment", item.payload,
                 content_type=item.text("content_type")) for item in items])
    discarded["attachment"] += len(crash.fields.get("sentryAttachmentsLeftOut", ()))
    return crash


@dataclass(frozen=True)
class Attached:
    """A file an upload carried, for its report: its name and type as sent, and where a form has
    them, its field and content type; `kept_as`, the name to keep it under when not its file name's
    (an inflated dump's)."""

    filename: str | None
    kind: str
    data: bytes
    form_field: str | None = None
    content_type: str | None = None
    kept_as: str | None = None

    def description(self, name: str) -> dict[str, str]:
        """As `sentryAttachments` lists it, kept as `name`."""
        facts = {"name": name, "field": self.form_field, "filename": self.filename, "attachmentType": self.kind,
                 "contentType": self.content_type}
        return {key: value for key, value in facts.items() if value is not None}

    def left_out(self) -> dict[str, Any]:
        """As `sentryAttachmentsLeftOut` lists it: its name cut as a kept one's is."""
        name = {} if self.filename is None else {"filename": cut(self.filename, _MAX_NAME_CHARS)}
        return {**name, "attachmentType": self.kind, "sizeBytes": len(self.data)}


def _compact(value: object) -> bytes:
    """JSON as a report's text writes it (with_attachments measures it so)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _json_bytes(value: object) -> int:
    return len(_compact(value))


# the keys of the lists and of the attachments, and their brackets
_LISTS_BYTES = _json_bytes({"sentryAttachmentsLeftOut": [], "sentryAttachments": [], "attachments": {}})


def with_attachments(event_id: str | None, fields: dict[str, Any], files: Sequence[Attached]) -> CrashReport:
    """The report of `fields` with what it can keep of `files`, byte-exact: minidumps first, then in
    the upload's order, at most MAX_ATTACHMENTS, and each while the report's JSON text, files in
    base64, stays within the JSON report's limit. An SDK drops an upload refused, its crash with it:
    the report keeps what it can and lists the rest in `sentryAttachmentsLeftOut`."""
    ordered = sorted(files, key=lambda file: file.kind != MINIDUMP)
    # every file's listing as left out is counted at first; one kept trades it for its description,
    # its name and its bytes in base64 (and the commas)
    size = _json_bytes(fields) + _LISTS_BYTES + sum(_json_bytes(file.left_out()) + 1 for file in ordered)
    attachments: dict[str, bytes] = {}
    described: list[dict[str, str]] = []
    left: list[dict[str, Any]] = []
    minidumps: list[str] = []
    for file in ordered:
        name = unique_attachment_name(file.kept_as or file.filename, attachments, file.kind == MINIDUMP)
        kept = (_json_bytes(file.description(name)) + _json_bytes(name) + 4 * -(-len(file.data) // 3) + 4
                - _json_bytes(file.left_out()))
        if len(attachments) == MAX_ATTACHMENTS or size + kept > MAX_BODY_BYTES:
            left.append(file.left_out())
            continue
        size += kept
        attachments[name] = file.data
        described.append(file.description(name))
        if file.kind == MINIDUMP:
            minidumps.append(name)
    fields = {**fields, **({"sentryAttachmentsLeftOut": left} if left else {}),
              **({"sentryAttachments": described} if described else {})}
    return CrashReport(event_id, fields, attachments, tuple(minidumps))


# --- an event as a crash report ---------------------------------------------------------------


def submission_fields(event: Mapping[str, Any], sku: str) -> dict[str, Any]:
    """The fields of a crash report for a Sentry event (the table above), without attachments."""
    exceptions = [value for value in _values(event.get("exception")) if isinstance(value, dict)]
    crash = exceptions[-1] if exceptions else None
    user_id = _obj(event.get("user")).get("id")
    player = str(user_id) if isinstance(user_id, int) and not isinstance(user_id, bool) else text_value(user_id)
    candidates: dict[str, Any] = {
        "sku": sku,
        "crashType": indexed_text(crash.get("type") if crash is not None else _message(event)),
        "errorCode": _error_code(crash) if crash is not None else None,
        "platform": indexed_text(_obj(_obj(event.get("contexts")).get("os")).get("name"))
                    or indexed_text(event.get("platform")),
        "buildVersion": indexed_text(event.get("release")),
        "playerId": player if player is not None and len(player) <= MAX_ID_CHARS else None,
        "clientTime": _client_time(event.get("timestamp")),
        "stackTrace": stack_trace(_frames(event, crash)),
    }
    fields = {name: value for name, value in candidates.items() if value is not None}
    fields["sentryEvent"] = event
    return fields


def _message(event: Mapping[str, Any]) -> str | None:
    logentry = _obj(event.get("logentry"))
    message = event.get("message")
    for text in (logentry.get("message"), logentry.get("formatted"), message,
                 _obj(message).get("message"), _obj(message).get("formatted")):
        line = text_value(text)
        if line is not None:
            return line.strip().splitlines()[0]
    return None


def _error_code(crash: Mapping[str, Any]) -> str | int | None:
    meta = _obj(_obj(crash.get("mechanism")).get("meta"))
    for key, number in (("signal", "number"), ("mach_exception", "exception"), ("errno", "number")):
        part = _obj(meta.get(key))
        name = indexed_text(part.get("name"))
        if name is not None:
            return name
        code = part.get(number)
        if isinstance(code, int) and not isinstance(code, bool) and INT64_MIN <= code <= INT64_MAX:
            return code
    return None


def _frames(event: Mapping[str, Any], crash: Mapping[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    threads = [thread for thread in _values(event.get("threads")) if isinstance(thread, dict)]
    traces = [crash.get("stacktrace") if crash is not None else None,
              *(thread.get("stacktrace") for thread in threads if thread.get("crashed") is True),
              *(thread.get("stacktrace") for thread in threads if thread.get("current") is True),
              event.get("stacktrace")]
    for trace in traces:
        frames = [frame for frame in _list(_obj(trace).get("frames")) if isinstance(frame, dict)]
        if frames:
            return frames
    return []


def stack_trace(frames: Sequence[Mapping[str, Any]]) -> str | None:
    """Sentry's frames (outermost first) as Blackbox's stack trace: one a line, innermost first."""
    if not frames:
        return None
    return "\n".join(frame_line(index, frame) for index, frame in enumerate(reversed(frames)))


def frame_line(index: int, frame: Mapping[str, Any]) -> str:
    function = _one_line(frame.get("function")) or _one_line(frame.get("symbol")) or "??"
    module = _one_line(frame.get("module"))
    if module is not None and not function.startswith(module):
        function = f"{module}.{function}"
    address = frame.get("instruction_addr")
    if isinstance(address, int) and not isinstance(address, bool):
        address = hex(address)
    parts = [f"#{index}", *filter(None, [_one_line(address)]), f"in {function}"]
    filename = _one_line(frame.get("filename")) or _one_line(frame.get("abs_path"))
    package = _one_line(frame.get("package"))
    lineno = frame.get("lineno")
    if filename is not None:
        has_line = isinstance(lineno, int) and not isinstance(lineno, bool)
        parts.append(f"at {filename}:{lineno}" if has_line else f"at {filename}")
    elif package is not None:
        # the binary's name, not where this machine installed it
        parts.append(f"from {package.replace(chr(92), '/').rsplit('/', 1)[-1]}")
    return " ".join(parts)


def _client_time(value: Any) -> str | int | None:
    if isinstance(value, str):
        return value if 0 < len(value) <= 64 else None
    return _seconds_ms(value, INT64_MIN, INT64_MAX)


# --- attachments ------------------------------------------------------------------------------


def attachment_name(filename: str | None, minidump: bool = False) -> str:
    """A name `/attachments/{name}` can be asked for, from a file name as sent."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c if c.isalnum() or c == "_" or c in _NAME_CHARS else "_" for c in base)[:_MAX_NAME_CHARS]
    try:
        return _ATTACHMENT_NAME.validate_python(name)
    except ValidationError:  # nothing left, or "." / ".."
        return "minidump.dmp" if minidump else "attachment"


def unique_attachment_name(filename: str | None, taken: Mapping[str, bytes], minidump: bool = False) -> str:
    """`attachment_name`, made unique among `taken` (the report's attachments so far)."""
    return _unique(attachment_name(filename, minidump), taken)


def _unique(name: str, taken: Mapping[str, bytes]) -> str:
    stem, dot, extension = name.rpartition(".")
    if not stem:
        stem, dot, extension = name, "", ""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        suffix = f"-{n}{dot}{extension}"
        candidate = stem[: _MAX_NAME_CHARS - len(suffix)] + suffix
    return candidate


# --- sessions ---------------------------------------------------------------------------------


def _session(payload: bytes, values: JsonValues) -> SessionUpdate | None:
    try:
        value = _json(payload, "the session", values)
    except TooManyValues:
        raise
    except ReporterError:
        return None
    if not isinstance(value, dict):
        return None
    sid, status, started = text_value(value.get("sid")), value.get("status", "ok"), sentry_time_ms(value.get("started"))
    errors = _count(value.get("errors", 0))
    if sid is None or status not in SESSION_STATUSES or started is None or errors is None:
        return None
    attrs = _obj(value.get("attrs"))
    return SessionUpdate(sid=sid, status=status, started_ms=started,
                         did=_identity(value.get("did")), timestamp_ms=sentry_time_ms(value.get("timestamp")),
                         errors=errors, release=text_value(attrs.get("release")),
                         environment=text_value(attrs.get("environment")))


def _aggregates(payload: bytes, values: JsonValues) -> list[SessionAggregate] | None:
    try:
        value = _json(payload, "the sessions", values)
    except TooManyValues:
        raise
    except ReporterError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("aggregates"), list):
        return None
    attrs = _obj(value.get("attrs"))
    buckets = []
    for bucket in value["aggregates"]:
        if not isinstance(bucket, dict):
            return None
        started = sentry_time_ms(bucket.get("started"))
        exited, errored, abnormal, crashed = (_count(bucket.get(name, 0))
                                              for name in ("exited", "errored", "abnormal", "crashed"))
        if started is None or exited is None or errored is None or abnormal is None or crashed is None:
            return None
        buckets.append(SessionAggregate(started_ms=started, did=_identity(bucket.get("did")), exited=exited,
                                        errored=errored, abnormal=abnormal, crashed=crashed,
                                        release=text_value(attrs.get("release")),
                                        environment=text_value(attrs.get("environment"))))
    return buckets


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SESSION_COUNT
    return value if ok else None


def sentry_time_ms(value: Any) -> int | None:
    """An RFC 3339 time or epoch seconds (Sentry writes either) as epoch milliseconds."""
    if isinstance(value, str):
        try:
            return parse_epoch_ms(value)
        except (ValueError, OverflowError):
            return None
    return _seconds_ms(value, FIRST_MS, LAST_MS)


def _seconds_ms(value: Any, first: int, last: int) -> int | None:
    """Epoch seconds (a JSON number) as epoch milliseconds from `first` to `last`, else None. The
    range is checked before the product: a float of 1e308 seconds has no milliseconds, and an
    integer of 400 digits no float (both OverflowError), where comparing with either is exact."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not first / 1000 <= value <= last / 1000:
        return None  # NaN compares false too
    epoch_ms = round(value * 1000)
    return epoch_ms if first <= epoch_ms <= last else None


# --- reading untrusted JSON -------------------------------------------------------------------


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _values(value: Any) -> list[Any]:
    """Sentry's interfaces are `{"values": [...]}`, or in older SDKs the list itself."""
    return _list(value.get("values")) if isinstance(value, dict) else _list(value)


def text_value(value: Any) -> str | None:
    """A JSON value that is text with something in it, else None."""
    return value if isinstance(value, str) and value.strip() else None


def indexed_text(value: Any) -> str | None:
    """text_value cut to what the index holds (a crash is never refused for an optional field)."""
    text = text_value(value)
    return text[:MAX_INDEXED_CHARS] if text is not None else None


def _identity(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text_value(value)


def _one_line(value: Any) -> str | None:
    """Text for one line of a stack trace: a newline in a name would split its frame in two."""
    text = text_value(value)
    return " ".join(text.split()) if text is not None else None
