"""Input limits shared by every POST, each refused with the contract's error rather than left to
fail later in a store (DESIGN §5)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, StringConstraints

from core.errors import InvalidField

# players, sessions and the like: long enough for any real id, short enough to index
MAX_ID_CHARS = 128
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
# a client's retry token: a UUID or a hash fits many times over
MAX_IDEMPOTENCY_KEY_CHARS = 256
# nesting deeper than this is no crash report, and deep recursion is how a parser is attacked
MAX_JSON_DEPTH = 32


def _not_a_directory(name: str) -> str:
    if name in (".", ".."):
        raise ValueError("an attachment name must not be . or ..")
    return name


# what a URL path segment may hold and still reach its handler (API Gateway, then Powertools'
# router): no separators, no control characters, no quotes
_SEGMENT = r"^[\w\-._~()'!*:@,;=+&$%<> \[\]{}|^]{1,128}$"
# a player id is asked for in a path (/players/{playerId})
PathSegment = Annotated[str, StringConstraints(pattern=_SEGMENT)]
# a file name, not a path, and one that can be asked for again (/attachments/{name})
AttachmentName = Annotated[str, StringConstraints(pattern=_SEGMENT), AfterValidator(_not_a_directory)]


def ascii_int(text: str, low: int, high: int) -> int | None:
    """`text` as an integer within [low, high] if it is ASCII digits after an optional minus, else
    None: int() also takes "١٢", "1_000" and spaces, and isdigit() takes "²", which int() refuses."""
    if re.fullmatch(r"-?[0-9]{1,20}", text) is None:
        return None
    value = int(text)
    return value if low <= value <= high else None


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
