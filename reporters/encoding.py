"""A request body as its `Content-Encoding` left it, decoded within a limit.

- `identity` (or no header), `gzip` (and its old name `x-gzip`, RFC 9110 §8.4.1.3), `deflate`:
  zlib-wrapped as RFC 9110 means it, or the raw deflate stream some clients send instead (told
  apart by the zlib header's check bits; a zlib-looking stream that fails is tried once as raw).
  Concatenated gzip members are read as one body, as `gzip -d` reads them.
- `br` (RFC 7932), which the Python Sentry SDK sends whenever it can import brotli, as Relay takes.
- Decoding stops as soon as the output passes `limit` bytes: a zip bomb (1 GiB of zeros is 1 MiB
  of gzip) costs at most `limit` bytes of memory and the time to inflate them, never its full size.
- A stream that ends early, has a bad checksum, or trailing bytes is refused: a body is whole or
  it is not taken.

Errors (`reporters.errors.ReporterError`): another encoding, or several stacked → 415
`unsupported_media_type`; past the limit → 413 `payload_too_large`; a broken stream → 400
`bad_request`.
"""

from __future__ import annotations

import zlib

import brotli

from reporters.errors import ReporterError

_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS


def decode_body(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """`body` decoded by `content_encoding` (the header's value, None when absent); at most `limit`
    bytes, else ReporterError."""
    coding = (content_encoding or "").strip().lower()
    if coding in ("", "identity"):
        if len(body) > limit:
            raise _too_large(limit)
        return body
    if coding in ("gzip", "x-gzip"):
        return _gunzip(body, limit)
    if coding == "deflate":
        return _inflate_deflate(body, limit)
    if coding == "br":
        return _unbrotli(body, limit)
    raise ReporterError("unsupported_encoding",
                        f"Content-Encoding {coding!r} is not supported; use gzip, deflate, br or identity",
                        "Content-Encoding")


def _too_large(limit: int) -> ReporterError:
    return ReporterError("too_large", f"the decoded body is over {limit} bytes")


def _corrupt(what: str) -> ReporterError:
    return ReporterError("corrupt", f"the body is not a whole {what} stream", "Content-Encoding")


def _inflate(data: bytes, wbits: int, limit: int) -> tuple[bytes, bytes]:
    """One zlib stream from the start of `data`, at most `limit` bytes of it: (output, the bytes
    after the stream). Output is asked for in slices of what the limit still allows, so no call
    inflates more than one byte past it."""
    inflater = zlib.decompressobj(wbits)
    out = bytearray()
    pending = data
    while not inflater.eof:
        chunk = inflater.decompress(pending, limit + 1 - len(out))
        out += chunk
        if len(out) > limit:
            raise _too_large(limit)
        pending = inflater.unconsumed_tail
        if not chunk and not pending:
            break  # every byte read, nothing more to give, and no end of stream: truncated
    if not inflater.eof:
        raise zlib.error("stream ends early")
    return bytes(out), inflater.unused_data


# gzip members a body may hold: each is read apart (and what follows it copied), so thousands of
# empty ones cost quadratic time; a writer that appends a few is the use
MAX_GZIP_MEMBERS = 16


def _gunzip(body: bytes, limit: int) -> bytes:
    out = b""
    rest = body
    try:
        for _ in range(MAX_GZIP_MEMBERS):
            try:
                member, rest = _inflate(rest, _GZIP, limit - len(out))
            except ReporterError:  # over what the members before it left: over the whole limit
                raise _too_large(limit) from None
            out += member
            if not rest:
                return out
    except zlib.error:
        raise _corrupt("gzip") from None
    raise ReporterError("corrupt", f"the gzip body holds more than {MAX_GZIP_MEMBERS} members", "Content-Encoding")


def _inflate_deflate(body: bytes, limit: int) -> bytes:
    # a zlib header is CMF (method 8) then FLG, with CMF*256 + FLG a multiple of 31
    looks_zlib = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    for wbits in (_ZLIB, _RAW) if looks_zlib else (_RAW,):
        try:
            out, rest = _inflate(body, wbits, limit)
        except zlib.error:
            continue
        if not rest:
            return out
    raise _corrupt("deflate")


# output asked of the brotli decoder at a time: it grows its buffer in doubling blocks up to 16 MiB
# past what it is asked for, so a bomb is stopped within this of the limit only if asked in steps
_BROTLI_STEP = 1 << 16


def _unbrotli(body: bytes, limit: int) -> bytes:
    decompressor = brotli.Decompressor()
    out = bytearray()
    pending = body
    try:
        while not decompressor.is_finished():
            chunk = decompressor.process(pending, output_buffer_limit=min(limit + 1 - len(out), _BROTLI_STEP))
            pending = b""  # the decoder keeps what it has not read yet
            out += chunk
            if len(out) > limit:
                raise _too_large(limit)
            if not chunk and decompressor.can_accept_more_data():
                raise _corrupt("brotli")  # every byte read, nothing more to give, no end: truncated
    except brotli.error:
        raise _corrupt("brotli") from None
    return bytes(out)
