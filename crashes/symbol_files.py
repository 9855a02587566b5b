"""The symbol files Blackbox holds (`/v1/symbols`): uploaded with a server key, listed, deleted.
An upload asks the processor to walk again the reports that lacked it (crashes.processing)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from crashes.processing import symbols_arrived
from crashes.symbols import SymbolFileRefused, symbol_file_id, symbol_path
from pipeline.topics import MINIDUMPS, publish
from ports import EventLog, SpillStore, SymbolStore
from ports import SymbolFile as Stored
from ports.cursors import Kind, decode_cursor, encode_cursor
from ports.errors import NotFound
from ports.timeutil import Time, now_ms, to_rfc3339

# a symbol file as stored, inflated: a game's largest run to hundreds of MB, which a request of
# the contract's 1 MiB (gzip) cannot carry anyway (a larger one: docs/api.md)
MAX_SYMBOL_FILE_BYTES = 64 << 20
# the S3 store reads each listed file's metadata: a page is that many requests
MAX_LISTED = 200
_CURSOR_KIND = Kind.SYMBOL_FILES


@with_config(ConfigDict(extra="forbid"))
class SymbolFile(TypedDict):
    path: Annotated[str, Field(description="<debug file>/<debug id>/<debug file, less .pdb>.sym, as symbol servers "
                                           "lay them out")]
    sizeBytes: int
    uploadedAt: Time


@with_config(ConfigDict(extra="forbid"))
class SymbolUpload(SymbolFile):
    debugFile: str
    debugId: str
    os: str
    arch: str


@with_config(ConfigDict(extra="forbid"))
class SymbolPage(TypedDict):
    symbols: list[SymbolFile]
    nextCursor: str | None


def upload(store: SymbolStore, log: EventLog, spill: SpillStore, sym: bytes) -> tuple[bool, SymbolUpload]:
    """Stores the file (True when new) by its MODULE line, then asks for the reports that lacked
    it to be walked again: durable on the log (or spilled) before the answer, as a capture is."""
    identity = symbol_file_id(sym)
    if b"\0" in sym:
        raise SymbolFileRefused("a Breakpad symbol file is text; this one holds NUL bytes", field="body")
    path = str(identity.path)
    uploaded_at = now_ms()
    created = store.put(path, sym, uploaded_at)
    publish(log, spill, MINIDUMPS, [symbols_arrived(path)])
    return created, {"path": path, "sizeBytes": len(sym), "uploadedAt": to_rfc3339(uploaded_at),
                     "debugFile": identity.debug_file, "debugId": identity.debug_id, "os": identity.os,
                     "arch": identity.arch}


def listing(store: SymbolStore, *, limit: int = 100, cursor: str | None = None) -> SymbolPage:
    after = decode_cursor(cursor, _CURSOR_KIND) or ""
    found = store.files(after, limit + 1)
    page = found[:limit]
    return {"symbols": [_listed(f) for f in page],
            "nextCursor": encode_cursor(_CURSOR_KIND, page[-1].path) if len(found) > limit else None}


def delete(store: SymbolStore, debug_file: str, debug_id: str) -> None:
    """Deletes the symbol file of this debug file (a plain file name) and id; reports walked with
    it keep their walk until they are walked again."""
    path = symbol_path(debug_file, debug_id)
    # "." and ".." are no names in a path; a name no file system holds (an S3 store took longer
    # ones before they were bounded) is the store's to find or not
    if debug_file in (".", "..") or not store.delete(str(path)):
        raise NotFound(f"no symbol file {path}")


def _listed(stored: Stored) -> SymbolFile:
    return {"path": stored.path, "sizeBytes": stored.size_bytes, "uploadedAt": to_rfc3339(stored.uploaded_at)}
