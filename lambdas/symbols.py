"""Symbols: the Breakpad symbol files minidumps are walked with."""

from __future__ import annotations

import threading
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.params import DIGITS, Cursor
from api.requests import BODY_EXTENSION
from api.resolver import answer, create_resolver, json_response, posted
from crashes import symbol_files
from crashes.symbol_files import MAX_LISTED, MAX_SYMBOL_FILE_BYTES, SymbolPage, SymbolUpload
from crashes.symbols import DEBUG_ID, MAX_DEBUG_FILE_CHARS
from ports.errors import Busy, UnsupportedMediaType
from ports.telemetry import instrumented
from reporters.encoding import decode_body

app = create_resolver()
# bytes, perhaps gzip: API Gateway passes this type through as bytes (its binary media types), and
# a browser's form cannot send it
SYMBOL_TYPE = "application/octet-stream"
_SYM = {"schema": {"type": "string", "format": "binary"}}
# a plain file name, as a MODULE line names it (crashes.symbols): it becomes a path
DebugFile = Annotated[str, Path(alias="debugFile", description="the module's debug file (a MODULE line's last part)",
                                pattern=rf"^[^/\\\x00]{{1,{MAX_DEBUG_FILE_CHARS}}}$")]
DebugId = Annotated[str, Path(alias="debugId", description="the module's debug id", pattern=rf"^{DEBUG_ID}$")]
# symbol files a process decodes at once: each inflates to as much as 64 MiB, copied on the way, and
# 32 uploads of 64 KB on a serve's handler threads took 3.7 GB. A Lambda takes one at a time anyway
DECODED_AT_ONCE = 2
DECODING = threading.BoundedSemaphore(DECODED_AT_ONCE)


@app.get("/v1/symbols", operation_id="listSymbols", summary="The symbol files held, by path",
         responses={200: answer(SymbolPage, "a page of symbol files")})
def list_symbols(limit: Annotated[int, Query(ge=1, le=MAX_LISTED), DIGITS] = 100,
                 cursor: Cursor = None) -> Response[str]:
    return json_response(200, symbol_files.listing(current().symbols, limit=limit, cursor=cursor))


@app.post("/v1/symbols", operation_id="postSymbols", summary="Upload a Breakpad symbol file",
          description="needs a server key. The body is the `.sym` file (from `dump_syms`), `Content-Type: "
                      "application/octet-stream`, perhaps `Content-Encoding: gzip`, `deflate` or `br`: "
                      f"at most 1 MiB as sent and {MAX_SYMBOL_FILE_BYTES >> 20} MiB as decoded. Stored by the debug "
                      "file and id of its MODULE line (one already there is replaced); the reports whose walk "
                      "lacked it are walked again",
          openapi_extensions={BODY_EXTENSION: {"required": True, "content": {SYMBOL_TYPE: _SYM}}},
          responses={200: answer(SymbolUpload, "replaced"), 201: answer(SymbolUpload, "stored")})
def post_symbols() -> Response[str]:
    request = posted(app.current_event, decodes=True)
    if (request.content_type or "").split(";")[0].strip().lower() != SYMBOL_TYPE:
        raise UnsupportedMediaType(f"a symbol file is sent as {SYMBOL_TYPE}")
    if not DECODING.acquire(blocking=False):
        raise Busy(f"this server takes {DECODED_AT_ONCE} symbol files at once; try again in {Busy.retry_after_s} s")
    try:
        sym = decode_body(request.body, request.content_encoding, MAX_SYMBOL_FILE_BYTES)
        a = current()
        created, stored = symbol_files.upload(a.symbols, a.log, a.spill, sym)
    finally:
        DECODING.release()
    return json_response(201 if created else 200, stored)


@app.delete("/v1/symbols/<debugFile>/<debugId>", operation_id="deleteSymbols",
            summary="Delete a symbol file", description="needs a server key; 404 when there is none",
            responses={204: {"description": "deleted"}})
def delete_symbols(debug_file: DebugFile, debug_id: DebugId) -> Response[str]:
    symbol_files.delete(current().symbols, debug_file, debug_id)
    return Response(status_code=204, body="")


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
