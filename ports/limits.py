"""Input limits shared by every POST, each refused with the contract's error rather than left to
fail later in a store (docs/api.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, WithJsonSchema

from ports.errors import InvalidField

# a POST's body as sent, a crash report with its attachments
MAX_BODY_BYTES = 1 << 20
# scores and integer fields a store keeps as a number: a signed 64-bit integer (a BIGINT)
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def _whole(value: object) -> object:
    """JSON Schema's integer includes 107.0, which serializers of a whole double write: taken as 107.
    From 2**53 on a double is no longer the number that was meant (2**53 + 1 reads as 2**53), so
    such a float stays a float, and is refused."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53 else value


# an integer, as JSON may write it (_whole); bounded where it is used
Whole = Annotated[int, BeforeValidator(_whole)]
# an integer a store keeps as a number (BIGINT where it is indexed), like a score: within 64 bits
Int64 = Annotated[Whole, Field(ge=INT64_MIN, le=INT64_MAX)]
# a 64-bit integer in an answer, which the document describes without bounds: as a float, as
# Powertools holds a bound, 2**63 - 1 is not itself (api.document)
Int64Answer = Annotated[int, WithJsonSchema({"type": "integer", "format": "int64"})]
# a game's build for a platform: crashes and sessions are counted by it, and a title key is scoped to some
SKU_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
SKU_CHARS = "1 to 64 of A-Z a-z 0-9 . _ : -, e.g. skyrift:pc"
Sku = Annotated[str, StringConstraints(pattern=SKU_PATTERN)]
# what a value of each pattern may be, in words: a refusal says these, not the pattern (the document
# keeps the pattern), whether the value was a body's, a query's or a path's (api.requests)
PATTERN_WORDS = {SKU_PATTERN: SKU_CHARS}
# a secret that signs: no spaces or control characters, which a secret pasted with its line's end
# would carry into every signature, where its receiver does not hold them
SECRET_PATTERN = r"^[!-~]+$"
PATTERN_WORDS[SECRET_PATTERN] = "ASCII letters, digits and punctuation, without spaces"
# players, sessions and the like: long enough for any real id, short enough to index
MAX_ID_CHARS = 128
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
# a client's retry token: a UUID or a hash fits many times over
MAX_IDEMPOTENCY_KEY_CHARS = 256
# what a deployment keeps, at most: ten years, as Couchbase keeps no document past January 2038
# (its expiry is a 32-bit Unix time: adapters.couchbase.documents)
MAX_RETENTION_DAYS = 3_650
# nesting deeper than this is no crash report, and deep recursion is how a parser is attacked
MAX_JSON_DEPTH = 32


# what a URL path segment may hold and still reach its handler: Powertools' router matches a path
# parameter with Python's re and this class (its _SAFE_URI, _UNSAFE_URI and \w). pydantic's own
# pattern runs on the regex crate, whose \w also takes combining marks (e\u0301, the vowel signs of
# Indic scripts) and drops other numbers (²): names it took then had no route. So the names are
# checked here with the router's engine and class, and a route finds every name a POST accepts.
_ROUTED = r"[\w\-._~()'!*:@,;=+&$%<> \[\]{}|^]"
_SEGMENT = re.compile(_ROUTED + "{1,128}")
_ROUTED_NAME = re.compile(_ROUTED + "+")


def routed(name: str) -> bool:
    """Whether a path parameter can be `name`, whatever its length (the router's class)."""
    return _ROUTED_NAME.fullmatch(name) is not None


def _routable(name: str) -> str:
    if _SEGMENT.fullmatch(name) is None:
        raise ValueError("must be 1 to 128 letters, digits or -._~()'!*:@,;=+&$%<> []{}|^")
    # a URL client resolves these as relative segments (even when escaped as %2E): never asked for
    if name in (".", ".."):
        raise ValueError("must not be . or ..")
    return name


def name_pattern(chars: str, most: int) -> str:
    """A pattern of names of 1 to `most` of a class's `chars` (that hold the dot), but not . or ..
    (as _routable says why), without the lookahead pydantic's regex crate does not have."""
    others = chars.replace(".", "")
    pattern = (rf"^(?:[{others}][{chars}]{{0,{most - 1}}}|\.[{others}][{chars}]{{0,{most - 2}}}"
               rf"|\.\.[{chars}]{{1,{most - 2}}})$")
    PATTERN_WORDS[pattern] = f"1 to {most} of {' '.join(re.findall(r'.-.|.', chars))} (not . or ..)"
    return pattern


# what a path segment (a player id in /players/{playerId}) may be, as the document says it: one
# pattern, in Python's words (its \w; pydantic's regex crate has no lookahead, so the check is _routable)
SEGMENT_PATTERN = rf"^(?!\.\.?$){_SEGMENT.pattern}$"
PathSegment = Annotated[str, StringConstraints(min_length=1, max_length=128), AfterValidator(_routable),
                        Field(json_schema_extra={"pattern": SEGMENT_PATTERN})]
# a file name, not a path, and one that can be asked for again (/attachments/{name})
AttachmentName = PathSegment


# an integer as the API takes one: int() also takes "١٢", "1_000" and spaces, and isdigit() takes
# "²", which int() refuses
ASCII_INT = re.compile(r"-?[0-9]{1,20}")


def ascii_int(text: str, low: int, high: int) -> int | None:
    """`text` as an integer within [low, high] if it is ASCII digits after an optional minus, else None."""
    if ASCII_INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if low <= value <= high else None


# the values a JSON body may hold, counted as the commas, `[` and `{` outside its strings (at most
# about twice its values): what parsing it costs. 1 MiB of `[{},{},…]` is 349,000 objects, 42 MB
# and 0.4 s of the GIL to parse and walk; a report's trace or log in a string counts nothing. A
# body of as many bytes or fewer holds no more, so most are not counted: counting 100 KB took ten
# times as long as parsing it
MAX_JSON_VALUES = 1 << 17


def _structure(data: bytes) -> int:
    return data.count(b",") + data.count(b"[") + data.count(b"{")


def _outside_strings(data: bytes) -> bytes:
    # without escaped backslashes and quotes, every other part between quotes is outside strings
    # (bytes' own methods: a pattern stepping through escapes took 31 ms for 1 MiB of them)
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(unescaped.split(b'"')[::2])


class TooManyJsonValues(InvalidField):
    """A body past MAX_JSON_VALUES: refused whole, whichever of its texts came to the bound."""


class JsonValues:
    """The values of JSON texts read as one body (an envelope's headers and items), at most
    MAX_JSON_VALUES in all, checked as each text is added, before it is parsed. Their length settles
    almost every body (a byte is a value at most); past it, the count over the texts, strings too,
    and past that again the count without their strings: each text counted once each way at most."""

    def __init__(self) -> None:
        self._bytes = 0
        self._over_strings = 0
        self._without_strings = 0
        # the texts not yet counted without their strings (all of them, until that count is needed)
        self._held: list[bytes] = []

    def add(self, data: bytes) -> None:
        before = self._bytes
        self._bytes += len(data)
        self._held.append(data)
        if self._bytes <= MAX_JSON_VALUES:
            return
        # the texts held while the length settled it are counted now, once; later ones as they come
        self._over_strings += sum(map(_structure, self._held if before <= MAX_JSON_VALUES else [data]))
        if self._over_strings <= MAX_JSON_VALUES:
            return
        self._without_strings += sum(_structure(_outside_strings(text)) for text in self._held)
        self._held.clear()
        if self._without_strings > MAX_JSON_VALUES:
            raise TooManyJsonValues(f"the JSON holds more than {MAX_JSON_VALUES:,} JSON values (counted as its "
                                    "commas, [ and { outside strings)", "body")


def check_json_values(data: bytes) -> None:
    """Refuses JSON text of more than MAX_JSON_VALUES values before it is parsed (JsonValues)."""
    JsonValues().add(data)


def check_json(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Nesting within `limit`, and every number a finite float at most (1e400 parses as infinity,
    which no JSON can carry on). Iterative, so a hostile document cannot exhaust the stack."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            raise InvalidField(f"JSON nests deeper than {limit} levels", "body")
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidField("a number is beyond the range of a 64-bit float", "body")


def carried_bytes(answered: str) -> int:
    """What an answer's JSON text (ASCII: json.dumps escapes the rest) takes as Lambda's runtime
    carries it, a string in the proxy answer's JSON: each `"` and `\\` escaped once more. Lambda
    answers at most 6 MB of that."""
    return len(answered) + answered.count('"') + answered.count("\\")


# a page of a listing stops at about this many bytes as Lambda carries it (carried_bytes), which
# answers at most 6 MB
PAGE_BYTES = 4 * 1024 * 1024


def within_bytes(sizes: Iterable[int], budget: int = PAGE_BYTES) -> int:
    """How many of the first of these sizes fit in `budget` (always at least one)."""
    total = count = 0
    for size in sizes:
        total += size
        if total > budget and count:
            break
        count += 1
    return count


def cut(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, the last "…" where it was longer: for names a client
    sends that are shown, not matched."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
