"""Unreal Engine's CrashReportClient uploads, read into Blackbox's crash reports.

Unreal's CrashReportClient posts one crash to `/api/{projectId}/unreal/{key}/` (Sentry's
endpoint, where a studio points its `DataRouterUrl`) as its compressed crash container: the crash
context (`CrashContext.runtime-xml`), the minidump (`UEMinidump.dmp`, `UE4Minidump.dmp`), the
game's log and CrashReportClient's ini. This module reads that body, after
`reporters.encoding.decode_body` has undone any `Content-Encoding`; it knows no HTTP. Every
refusal is a `reporters.errors.ReporterError`, whatever the bytes.

**The container**, as getsentry/symbolic reads it (symbolic-unreal/src/container.rs:
`Unreal4Crash`, `Unreal4Header`, `Unreal4FileMeta`; Epic's CrashUpload.cpp writes it). The body
is one zlib stream; inflated, little-endian throughout:

    string   = u32 length, then that many bytes (ANSI, NUL-padded: Unreal writes 260)
    header   = string directory_name, string file_name, i32 uncompressed_size, i32 file_count
    file     = i32 index, string file_name, i32 length, then that many bytes
    CR1      = b"CR1", header, file_count files                      (Unreal 4.26 and later)
    legacy   = header (a placeholder), files, header (the real one)  (earlier: the count is read
               from the last 4 bytes, the last field of the trailing header)

and nothing after it.

| bound | value | past it |
|---|---|---|
| the body, and the container once inflated | `MAX_CRASH_BYTES` = 1 MiB (the JSON report's limit) | 413 |
| files | `MAX_FILES` = 64 (`crashes.model.MAX_ATTACHMENTS`) | 400 |
| a string | `MAX_STRING_BYTES` = 1 KiB | 400 |
| a length or count past what is left, negative, or bytes after the end | | 400 |
| the context | XML with no DTD (so no entities), well formed | 400 |
| the context's elements, a JSON value of the report each | `MAX_JSON_VALUES` = 131,072 | 400 |

A crash with neither a context nor a minidump is refused (400): there is nothing to read.

**The report** (the fields of `POST /v1/crashes`), from the context's `RuntimeProperties`:

- the event id (32 hex digits, idempotency): from `CrashGUID` (`UECC-Windows-<hex>_0000`, whose
  suffix counts the crashes of one process), as a name-based UUID, so that a retry is the same
  report;
- `crashType`: `ErrorMessage`'s first line (`Assertion failed: …`, `Unhandled Exception:
  EXCEPTION_ACCESS_VIOLATION …`), else `CrashType` (`Crash`, `Assert`, `Ensure`, `GPUCrash`),
  else `minidump` until processing names the crash (`unknown` without a minidump);
- `buildVersion`: `BuildVersion`, else `EngineVersion`; `platform`: `PlatformName`;
- `playerId`: `EpicAccountId`, else `LoginId`, else `UserName` (the OS account): the first that
  is 1 to 128 characters;
- `stackTrace`: `CallStack`, as the client symbolicated it (`Game!AActor::BeginPlay()` a line,
  innermost first), until processing walks the minidump;
- `unrealContext`: the whole context, element → text, a repeated element as a list;
  `unrealCrash`: the container's directory and file name;
- `attachments`: every file, the minidump first, bytes as sent, names made safe as `reporters.sentry.attachment_name`
  makes them; `sentryAttachments` describes each with Sentry's attachment type:
  `event.minidump` for the first file that is a minidump (`crashes.model.is_minidump`; listed in
  `CrashReport.minidumps`), `unreal.context`, `unreal.logs` for `*.log`,
  `event.applecrashreport` for a Mac's crash report, else `event.attachment`.

Text fields past 256 characters are cut to 256, as `reporters.sentry` cuts them.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from io import BytesIO
from typing import Any
from xml.etree.ElementTree import Element, ParseError

# defusedxml ships no type information
from defusedxml import DefusedXmlException  # type: ignore[import-untyped]
from defusedxml.ElementTree import iterparse  # type: ignore[import-untyped]

from crashes.model import MAX_ATTACHMENTS, is_minidump
from ports.limits import MAX_BODY_BYTES, MAX_ID_CHARS, MAX_JSON_VALUES
from reporters.encoding import decode_body
from reporters.errors import ReporterError
from reporters.sentry import (
    MINIDUMP,
    Attached,
    CrashReport,
    SentryEnvelope,
    indexed_text,
    text_value,
    with_attachments,
)

MAX_CRASH_BYTES = MAX_BODY_BYTES
MAX_FILES = MAX_ATTACHMENTS
MAX_STRING_BYTES = 1 << 10
CONTEXT_FILE = "CrashContext.runtime-xml"
_CR1 = b"CR1"
# the smallest file entry: index, an empty name's length, length
_MIN_FILE_BYTES = 12
# the context nests three levels (root, section, value); deeper elements are kept as their text
_MAX_XML_DEPTH = 8
# CrashGUIDs are names in this namespace: the event id of a crash is the same on every retry
_CRASH_GUIDS = uuid.UUID("5f0b6f5e-4c1d-4b7a-9a51-6e3c2d1b0a99")
_PLAYER_KEYS = ("EpicAccountId", "LoginId", "UserName")


@dataclass(frozen=True)
class UnrealFile:
    index: int
    name: str
    data: bytes


@dataclass(frozen=True)
class UnrealCrash:
    """An inflated container: its header's names and its files in order."""

    directory_name: str
    file_name: str
    files: tuple[UnrealFile, ...]


def parse_unreal_crash(body: bytes, sku: str) -> SentryEnvelope:
    """A CrashReportClient upload (its compressed crash container) as the crash report for `sku`."""
    crash = _report(read_container(inflate(body)), sku)
    return SentryEnvelope(event_id=crash.event_id, crash=crash)


def inflate(body: bytes) -> bytes:
    """The container inside the body's zlib stream, at most `MAX_CRASH_BYTES` of it."""
    if len(body) > MAX_CRASH_BYTES:
        raise ReporterError("too_large", f"the crash is {len(body)} bytes; the limit is {MAX_CRASH_BYTES}")
    try:
        return decode_body(body, "deflate", MAX_CRASH_BYTES)
    except ReporterError as exc:
        raise ReporterError(exc.reason, f"the Unreal crash container: {exc.message}") from None


def read_container(data: bytes) -> UnrealCrash:
    """The files of an inflated container, either layout, every length checked against what is left."""
    reader = _Reader(data)
    if data.startswith(_CR1):
        reader.offset = len(_CR1)
        directory, name, count = reader.header()
        files = reader.files(count)
    else:
        # the leading header is a placeholder; the real one ends the container, its count last
        if len(data) < 4:
            raise ReporterError("invalid", "the Unreal crash container is empty")
        (count,) = struct.unpack_from("<i", data, len(data) - 4)
        reader.header()
        files = reader.files(count)
        directory, name, _ = reader.header()
    if reader.offset != len(data):
        raise ReporterError("invalid", f"the Unreal crash container has {len(data) - reader.offset} bytes "
                                       "after its last part")
    return UnrealCrash(directory, name, files)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def i32(self, what: str) -> int:
        if self.offset + 4 > len(self.data):
            raise ReporterError("invalid", f"the Unreal crash container ends inside {what}")
        (value,) = struct.unpack_from("<i", self.data, self.offset)
        self.offset += 4
        return int(value)

    def take(self, length: int, what: str) -> bytes:
        left = len(self.data) - self.offset
        if not 0 <= length <= left:
            raise ReporterError("invalid", f"{what} says {length} bytes but {left} are left")
        chunk = self.data[self.offset:self.offset + length]
        self.offset += length
        return chunk

    def string(self, what: str) -> str:
        length = self.i32(f"{what}'s length") & 0xFFFFFFFF  # a u32
        if length > MAX_STRING_BYTES:
            raise ReporterError("invalid", f"{what} says {length} bytes; a name holds at most {MAX_STRING_BYTES}")
        return self.take(length, what).decode("utf-8", "replace").rstrip("\0")

    def header(self) -> tuple[str, str, int]:
        directory = self.string("the header's directory name")
        name = self.string("the header's file name")
        self.i32("the header's uncompressed size")
        return directory, name, self.i32("the header's file count")

    def files(self, count: int) -> tuple[UnrealFile, ...]:
        if not 0 <= count <= MAX_FILES:
            raise ReporterError("invalid", f"the Unreal crash container says {count} files; it may hold 0 "
                                           f"to {MAX_FILES}")
        if count * _MIN_FILE_BYTES > len(self.data) - self.offset:
            raise ReporterError("invalid", f"the Unreal crash container says {count} files but is shorter")
        files = []
        for position in range(count):
            what = f"file {position}"
            index = self.i32(f"{what}'s index")
            name = self.string(f"{what}'s name")
            files.append(UnrealFile(index, name, self.take(self.i32(f"{what}'s length"), what)))
        return tuple(files)


# --- the report -------------------------------------------------------------------------------


def _report(crash: UnrealCrash, sku: str) -> CrashReport:
    contexts = [file for file in crash.files if file.name == CONTEXT_FILE]
    dump = next((file for file in crash.files if is_minidump(file.data)), None)
    if not contexts and dump is None:
        raise ReporterError("invalid", f"the Unreal crash holds neither {CONTEXT_FILE} nor a minidump")
    context = context_values(contexts[0].data) if contexts else {}
    runtime = context.get("RuntimeProperties")
    runtime = runtime if isinstance(runtime, dict) else {}
    guid = text_value(runtime.get("CrashGUID"))
    event_id = uuid.uuid5(_CRASH_GUIDS, guid).hex if guid is not None else None
    error = text_value(runtime.get("ErrorMessage"))
    player = next((value for key in _PLAYER_KEYS
                   if (value := text_value(runtime.get(key))) is not None and len(value) <= MAX_ID_CHARS), None)
    candidates: dict[str, Any] = {
        "sku": sku,
        "crashType": indexed_text(error.splitlines()[0] if error is not None else None)
                     or indexed_text(runtime.get("CrashType")) or ("minidump" if dump is not None else "unknown"),
        "platform": indexed_text(runtime.get("PlatformName")),
        "buildVersion": indexed_text(text_value(runtime.get("BuildVersion")) or runtime.get("EngineVersion")),
        "playerId": player,
        "stackTrace": text_value(runtime.get("CallStack")),
        "unrealContext": context or None,
        "unrealCrash": {"directoryName": crash.directory_name, "fileName": crash.file_name},
    }
    fields = {name: value for name, value in candidates.items() if value is not None}
    # the minidump first, as every reporter's report has it; the others in the container's order
    return with_attachments(event_id, fields, [Attached(file.name, _attachment_type(file, dump), file.data)
                                               for file in crash.files])


def _attachment_type(file: UnrealFile, dump: UnrealFile | None) -> str:
    if file is dump:
        return MINIDUMP
    if file.name == CONTEXT_FILE:
        return "unreal.context"
    if file.name.endswith(".log"):
        return "unreal.logs"
    if file.data.startswith(b"Incident Identifier:"):  # what a Mac's CrashReportClient sends instead of a dump
        return "event.applecrashreport"
    return "event.attachment"


def context_values(data: bytes) -> dict[str, Any]:
    """`CrashContext.runtime-xml` (`<FGenericCrashContext>`) as element → text, read by defusedxml
    with no DTD allowed, so no entity can expand; an element is a JSON value of the report, so at
    most MAX_JSON_VALUES of them, counted as they are read."""
    try:
        reading = iterparse(BytesIO(data), ("start",), forbid_dtd=True)
        for elements, _ in enumerate(reading, 1):
            if elements > MAX_JSON_VALUES:
                raise ReporterError("invalid", f"{CONTEXT_FILE} holds more than {MAX_JSON_VALUES:,} elements, a JSON "
                                    "value of the report each (the most a body holds)", CONTEXT_FILE)
        root: Element = reading.root
    # LookupError: an encoding Python lacks; ValueError: one of several bytes a character, which expat reads not
    except (ParseError, DefusedXmlException, LookupError, ValueError) as exc:
        raise ReporterError("invalid", f"{CONTEXT_FILE} is not plain XML: {exc}", CONTEXT_FILE) from None
    values = _element(root, 1)
    return values if isinstance(values, dict) else {}


def _element(element: Element, depth: int) -> Any:
    children = list(element)
    if not children or depth == _MAX_XML_DEPTH:
        return (element.text or "").strip()
    groups: dict[str, list[Any]] = {}
    for child in children:
        groups.setdefault(child.tag, []).append(_element(child, depth + 1))
    return {tag: values[0] if len(values) == 1 else values for tag, values in groups.items()}

