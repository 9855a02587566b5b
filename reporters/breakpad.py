"""Crashpad and Breakpad minidump uploads, read into Blackbox's crash reports.

A native game ships Crashpad (Chromium's, and the Sentry native SDK's backend) or Google Breakpad;
both post a crash as `multipart/form-data`: the minidump as the file part `upload_file_minidump`
and the crash's annotations as text parts. Sentry takes them on `/api/{projectId}/minidump/`,
Mozilla's Socorro (its collector, Antenna) on `/submit`; Blackbox takes both with this reader,
after `reporters.encoding.decode_body` has undone `Content-Encoding` (Crashpad gzips the whole
body when asked, with `Content-Encoding: gzip`). It knows no HTTP; every refusal is a
`reporters.errors.ReporterError`, whatever the bytes.

**What the clients send** (chromium/crashpad util/net/http_multipart_builder.cc and
handler/crash_report_upload_thread.cc; google-breakpad's http_upload.cc):

- Crashpad: a boundary `---MultipartBoundary-<32 letters and digits>---`; one part a field,
  `Content-Disposition: form-data; name="<key>"` (the key with `"`, CR, LF and `%` %-escaped),
  for every annotation of the crashed process (`prod`, `ver`, `plat`, `ptype`, `list_annotations`,
  the Sentry SDK's `sentry[...]`…) and `guid`: the *installation's* client id, the same for every
  crash of one machine. Then the dump: `name="upload_file_minidump"; filename="<report uuid>.dmp"`,
  `Content-Type: application/octet-stream`; a retry sends the same report, so the same file name.
  Attachments (`--attachment`) follow as file parts named by their file name.
- Breakpad: boundary `---------------------------<16 hex digits>` (Windows) or curl's (Linux),
  fields such as `ProductName`, `Version`, `BuildID`, `ReleaseChannel`, `CrashTime` (epoch
  seconds), and `upload_file_minidump` with the dump's path as its file name.
- Sentry also reads a `sentry` field (an event as JSON) and `sentry[a][b]` fields (one value of
  the event each), as Relay does (relay-server endpoints/minidump.rs, utils/multipart.rs).
- A body of type `application/octet-stream` or `application/x-dmp` is a bare minidump (Relay).

The form is split by `multipart` (defnull's, Bottle's parser: sans-IO, with its own bounds on
parts, part headers and part sizes, where python-multipart leaves every bound to callbacks).

| bound | value | past it |
|---|---|---|
| the decoded body | `MAX_UPLOAD_BYTES` = 1 MiB (the JSON report's limit) | 413 |
| parts | `MAX_PARTS` = 64 (a report keeps at most 64 attachments) | 400 |
| a part's header line, headers per part | 4 KiB, 8 | 400 |
| a field's name | `MAX_NAME_CHARS` = 256 characters | 400 |
| a text field's value | `MAX_VALUE_BYTES` = 64 KiB (a Crashpad annotation holds at most 20 KiB) | 400 |
| `upload_file_minidump` | exactly one, a minidump (`crashes.model.is_minidump`: `MDMP`, its version) | 400 |

A gzip-wrapped dump (a `.gz`, as Relay takes one) is inflated within the body's limit.

Not `multipart/form-data`, `multipart/mixed` (Antenna takes it) or a bare dump: 415. A part
without a name is dropped, as Antenna drops it.

**The report** (the fields of `POST /v1/crashes`):

- `crashType`: `minidump` until the processing stage has walked the dump's stack and names the
  crash; `platform`: the annotation `platform` or `plat` (Crashpad's; `ptype` is Chrome's process
  type, not a platform), else `native`; `buildVersion`: `Version`, `ver` or `version`;
  `productName`: `ProductName`, `prod` or `product`; `clientTime`: `CrashTime` in epoch ms.
- Sent with a Sentry event (`sentry`, `sentry[...]`), the event's own fields come first, as
  `reporters.sentry` reads them (its `release`, `user.id`, `contexts.os`…), kept as `sentryEvent`.
  sentry-native's Crashpad backend (the Sentry Unreal and Unity plugins' on Windows) sends no
  annotations but its scope as the MessagePack file `__sentry-event`, and its breadcrumbs in
  `__sentry-breadcrumb1` and `2` (each a stream of them, the two written in turns), which Sentry
  reads into the event (sentry/lang/native/minidump.py: `merge_attached_event`, each value not
  null over the form's; `merge_attached_breadcrumbs`, the older file's first, as many as the
  longer holds): so does this. An empty one is passed over; one that is past Sentry's size for it
  (100 KB, 50 KB), or makes no JSON object (a byte string, too deep), is kept as a file instead.
- `annotations`: every other text field, name → value (UTF-8, undecodable bytes replaced, as
  Relay and Antenna read them; the last of a repeated name).
- `attachments`: the dump first, named from its file name (else `upload_file_minidump.dmp`), then
  every other file part, bytes as sent, names made safe as `reporters.sentry.attachment_name`
  makes them; `sentryAttachments` describes each (`attachmentType` `event.minidump` for the dump,
  which `CrashReport.minidumps` lists too, so that processing finds it).
- The event id (idempotency: a retry is the same report): the Sentry event's `event_id`, else the
  dump's file name when it is a UUID (Crashpad's report id); never `guid`, which names a machine.

Socorro's clients read the answer `CrashID=bp-<id>` (`socorro_answer`). Socorro's own ids end
in a throttle digit and the date (`…0241124`); Blackbox answers the id it keeps, whole, since a
Breakpad client stores the text and never reads the date from it.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import msgpack  # type: ignore[import-untyped]

# defnull's multipart ships no type information
from multipart import (  # type: ignore[import-untyped]
    MultipartError,
    MultipartSegment,
    ParserLimitReached,
    PushMultipartParser,
    parse_options_header,
)

from crashes.model import MAX_INDEXED_CHARS, is_minidump
from ports.limits import MAX_BODY_BYTES, JsonValues, ascii_int
from ports.timeutil import FIRST_MS, LAST_MS
from reporters.encoding import decode_body
from reporters.errors import ReporterError
from reporters.sentry import (
    EVENT_DEPTH,
    MINIDUMP,
    Attached,
    CrashReport,
    SentryEnvelope,
    TooManyValues,
    event_object,
    sentry_event_id,
    sentry_time_ms,
    submission_fields,
    unique_attachment_name,
    with_attachments,
)

MAX_UPLOAD_BYTES = MAX_BODY_BYTES
MAX_PARTS = 64
MAX_NAME_CHARS = 256
MAX_VALUE_BYTES = 64 << 10
MAX_PART_HEADER_BYTES = 4 << 10
MAX_PART_HEADERS = 8
MINIDUMP_FIELD = "upload_file_minidump"
_GZIP_MAGIC = b"\x1f\x8b"
FORM_TYPES = frozenset({"multipart/form-data", "multipart/mixed"})
RAW_MINIDUMP_TYPES = frozenset({"application/octet-stream", "application/x-dmp"})
# `sentry[a][b]`: the event's a.b; deeper paths than this are kept as plain annotations
_SENTRY_KEY = re.compile(r"sentry((?:\[[^\[\]]+\]){1,8})")
_VERSION_KEYS = ("Version", "ver", "version")
_PRODUCT_KEYS = ("ProductName", "prod", "product")
_PLATFORM_KEYS = ("platform", "plat")


@dataclass(frozen=True)
class Part:
    """One part of the form: its name, file name and type as sent, and its bytes."""

    name: str
    filename: str | None
    content_type: str | None
    data: bytes


def parse_minidump_upload(body: bytes, content_type: str | None, sku: str) -> SentryEnvelope:
    """A Crashpad or Breakpad upload (decoded body, its `Content-Type`) as the crash report it
    carries for `sku`."""
    if len(body) > MAX_UPLOAD_BYTES:
        raise ReporterError("too_large", f"the upload is {len(body)} bytes; the limit is {MAX_UPLOAD_BYTES}")
    if body.startswith(_GZIP_MAGIC):
        # a form begins with its boundary's dashes: this one lost its Content-Encoding on the way
        body = decode_body(body, "gzip", MAX_UPLOAD_BYTES)
    media, options = parse_options_header(content_type or "")
    if media in RAW_MINIDUMP_TYPES:
        parts = [Part(MINIDUMP_FIELD, None, media, body)]
    elif media in FORM_TYPES:
        parts = split_form(body, options.get("boundary"))
    else:
        raise ReporterError("unsupported_encoding",
                            f"Content-Type {media[:64]!r} is no minidump upload; send multipart/form-data",
                            "Content-Type")
    crash = _report(parts, sku)
    return SentryEnvelope(event_id=crash.event_id, crash=crash)


def socorro_answer(event_id: str) -> str:
    """What a Breakpad client reads back from Socorro's `/submit`: `CrashID=bp-<uuid>`."""
    return f"CrashID=bp-{uuid.UUID(event_id)}\n"


def split_form(body: bytes, boundary: str | None) -> list[Part]:
    """The named parts of a `multipart/form-data` body, within the bounds above."""
    if not boundary:
        raise ReporterError("invalid", "the multipart Content-Type has no boundary", "Content-Type")
    parts: list[Part] = []
    try:
        # latin-1 reads any byte: the names are read as UTF-8 below
        parser = PushMultipartParser(boundary, content_length=len(body), header_charset="latin-1",
                                     max_header_size=MAX_PART_HEADER_BYTES,
                                     max_header_count=MAX_PART_HEADERS, max_segment_size=MAX_UPLOAD_BYTES,
                                     max_segment_count=MAX_PARTS)
        segment: MultipartSegment | None = None
        chunks: list[bytes] = []
        for data in (body, b""):  # b"": the end of the input
            for event in parser.parse(data):
                if isinstance(event, MultipartSegment):
                    segment, chunks = event, []
                elif event is not None:
                    chunks.append(event)
                elif segment is not None and segment.name:
                    parts.append(_part(segment, b"".join(chunks)))
        parser.close()
    except ParserLimitReached as exc:
        raise ReporterError("invalid", f"the form is past a bound ({exc}): at most {MAX_PARTS} parts, and "
                                       f"{MAX_PART_HEADERS} header lines of {MAX_PART_HEADER_BYTES} bytes a part"
                            ) from None
    except MultipartError as exc:
        raise ReporterError("invalid", f"the body is not multipart/form-data: {exc}") from None
    return parts


def _utf8(header_text: str, errors: str = "replace") -> str:
    """A part header's text as UTF-8, from its latin-1 reading (one character a byte), a byte that
    is none read as `errors` says; a value the parser decoded itself (RFC 2231's
    `filename*=UTF-8''…`) is kept as it is."""
    try:
        return header_text.encode("latin-1").decode("utf-8", errors)
    except UnicodeEncodeError:
        return header_text


def _part(segment: MultipartSegment, data: bytes) -> Part:
    name = _utf8(segment.name, "backslashreplace")  # escaped: two names that differ there stay two
    if len(name) > MAX_NAME_CHARS:
        raise ReporterError("invalid", f"a field name is over {MAX_NAME_CHARS} characters", name[:64])
    # a dump sent as a plain field (no file name) is no text field: it has the upload's limit
    if segment.filename is None and name != MINIDUMP_FIELD and len(data) > MAX_VALUE_BYTES:
        raise ReporterError("invalid", f"field {name!r} is over {MAX_VALUE_BYTES} bytes", name)
    return Part(name, None if segment.filename is None else _utf8(segment.filename),
                None if segment.content_type is None else _utf8(segment.content_type), data)


# --- the report -------------------------------------------------------------------------------


# sentry-native's Crashpad files of its scope and breadcrumbs, and the sizes Sentry reads them to
SENTRY_EVENT_PART = "__sentry-event"
BREADCRUMB_PARTS = ("__sentry-breadcrumb1", "__sentry-breadcrumb2")
MAX_ATTACHED_EVENT_BYTES = 100_000
MAX_ATTACHED_BREADCRUMBS_BYTES = 50_000


def _attached(part: str, data: bytes, limit: int, breadcrumbs: bool, values: JsonValues) -> list[dict[str, Any]] | None:
    """A MessagePack part's objects (the event, or a stream of breadcrumbs) as JSON's, else None: past `limit`,
    not MessagePack, or one not an object, deeper than the report holds it, or holding what JSON
    cannot (a byte string, a key not text)."""
    if len(data) > limit:
        return None
    if not data:  # one not written yet (Sentry passes over it too)
        return []
    try:
        unpacked = (list(msgpack.Unpacker(BytesIO(data), raw=False)) if breadcrumbs
                    else [msgpack.unpackb(data, raw=False)])
        # each held to what a Sentry event in JSON is (an object; depth, numbers, text), as a sentry field
        # is; a breadcrumb lies two levels below the event in the report (its list, then itself)
        depth = EVENT_DEPTH - 2 if breadcrumbs else EVENT_DEPTH
        return [event_object(json.dumps(value, allow_nan=False).encode(), part, values, depth) for value in unpacked]
    except TooManyValues:
        raise  # the form's values together: refused whole, as a sentry field past them is
    # RecursionError: msgpack nests deeper than json.dumps recurses
    except (ValueError, TypeError, RecursionError, ReporterError, msgpack.UnpackException):
        return None


def _merged_breadcrumbs(files: list[list[Any]]) -> list[Any]:
    """The breadcrumb files as one list, the older first by their last timestamps, as many as the
    longer holds (merge_attached_breadcrumbs)."""

    def last_ms(crumbs: list[Any]) -> int:
        times = [sentry_time_ms(crumb.get("timestamp")) for crumb in crumbs if isinstance(crumb, dict)]
        return max((t for t in times if t is not None), default=0)

    merged = [crumb for crumbs in sorted(files, key=last_ms) for crumb in crumbs]
    return merged[-max(map(len, files)):]


def _read_parts(parts: list[Part]) -> tuple[dict[str, str], dict[str, Any], list[Part]]:
    """The parts but the dump: the annotations, the Sentry event they make (sentry fields, then
    sentry-native's files), and the files."""
    annotations: dict[str, str] = {}
    event: dict[str, Any] = {}
    attached: dict[str, Any] = {}
    breadcrumbs: list[list[Any]] = []
    files: list[Part] = []
    # the JSON of every field and part, bounded together as one body's (a field is at most 64 KiB)
    values = JsonValues()
    for part in parts:
        if part.name == MINIDUMP_FIELD:
            continue
        if part.name == SENTRY_EVENT_PART and (read := _attached(part.name, part.data, MAX_ATTACHED_EVENT_BYTES,
                                                                   False, values)) is not None:
            for value in read:
                attached.update(value)
        elif part.name in BREADCRUMB_PARTS and (crumbs := _attached(part.name, part.data,
                                                                    MAX_ATTACHED_BREADCRUMBS_BYTES, True,
                                                                    values)) is not None:
            if crumbs:
                breadcrumbs.append(crumbs)
        elif part.filename is not None:
            files.append(part)
        elif part.name == "sentry":
            event.update(event_object(part.data, "the sentry field", values))
        elif (path := _SENTRY_KEY.fullmatch(part.name)) is not None:
            _set_path(event, re.findall(r"\[([^\[\]]+)\]", path.group(1)), _text(part.data))
        else:
            annotations[part.name] = _text(part.data)
    event.update((key, value) for key, value in attached.items() if value is not None)
    if breadcrumbs:
        own = event.get("breadcrumbs")
        event["breadcrumbs"] = _merged_breadcrumbs([*([own] if isinstance(own, list) and own else []), *breadcrumbs])
    return annotations, event, files


def _report(parts: list[Part], sku: str) -> CrashReport:
    dumps = [part for part in parts if part.name == MINIDUMP_FIELD]
    if not dumps:
        raise ReporterError("invalid", f"the upload has no {MINIDUMP_FIELD} part", MINIDUMP_FIELD)
    if len(dumps) > 1:
        raise ReporterError("invalid", f"the upload has {len(dumps)} {MINIDUMP_FIELD} parts; one is read",
                            MINIDUMP_FIELD)
    annotations, event, files = _read_parts(parts)
    fields: dict[str, Any] = submission_fields(event, sku) if event else {"sku": sku}
    for name, value in (("crashType", "minidump"),
                        ("platform", _first(annotations, _PLATFORM_KEYS) or "native"),
                        ("buildVersion", _first(annotations, _VERSION_KEYS)),
                        ("productName", _first(annotations, _PRODUCT_KEYS)),
                        ("clientTime", _crash_time(annotations.get("CrashTime")))):
        if value is not None:
            fields.setdefault(name, value)
    fields["annotations"] = annotations
    dump, dump_name = _minidump(dumps[0])
    event_id = sentry_event_id(event.get("event_id")) or sentry_event_id(dump_name.rpartition(".")[0])
    return with_attachments(event_id, fields, [
        Attached(dumps[0].filename, MINIDUMP, dump, form_field=dumps[0].name, content_type=dumps[0].content_type,
                 kept_as=dump_name),
        *(Attached(file.filename, "event.attachment", file.data, form_field=file.name, content_type=file.content_type)
          for file in files)])


def _minidump(part: Part) -> tuple[bytes, str]:
    """The dump's bytes, inflated if gzip-wrapped, and the file name it is kept under."""
    data = part.data
    filename = unique_attachment_name(part.filename or f"{MINIDUMP_FIELD}.dmp", {}, minidump=True)
    if data.startswith(_GZIP_MAGIC):
        try:
            data = decode_body(data, "gzip", MAX_UPLOAD_BYTES)
        except ReporterError as exc:
            raise ReporterError(exc.reason, f"{MINIDUMP_FIELD}: {exc.message}", MINIDUMP_FIELD) from None
        filename = filename.removesuffix(".gz")
    if not is_minidump(data):
        raise ReporterError("invalid", f"{MINIDUMP_FIELD} is no minidump: it does not start with MDMP and a "
                            "minidump's version", MINIDUMP_FIELD)
    return data, filename


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _set_path(event: dict[str, Any], path: list[str], value: str) -> None:
    """`event[a][b] = value` for the path [a, b], making (or replacing) objects on the way."""
    node = event
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = value


def _first(annotations: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = annotations.get(key, "").strip()
        if value:
            return value[:MAX_INDEXED_CHARS]
    return None


def _crash_time(value: str | None) -> int | None:
    """Breakpad's `CrashTime`, epoch seconds as digits, in epoch milliseconds."""
    seconds = ascii_int(value.strip(), FIRST_MS // 1000, LAST_MS // 1000) if value is not None else None
    return seconds * 1000 if seconds is not None else None
