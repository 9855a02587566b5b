"""Times are epoch milliseconds inside Blackbox and RFC 3339 UTC with milliseconds outside."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import Field
from typing_extensions import TypeAliasType

from ports.errors import InvalidField
from ports.limits import ascii_int

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
# what RFC 3339 can say, so epoch milliseconds outside it (and outside a BIGINT) are refused too
FIRST_MS = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
LAST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)

# RFC 3339's date-time (section 5.6, with the lower case and the space its notes allow), which
# fromisoformat reads with much more of ISO 8601: week and ordinal dates, the basic format, a time
# of hours alone, all read as some date (the zone is matched apart, to say so when it is missing)
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d+)?([Zz]|[+-]\d\d:\d\d)?", re.ASCII)

# a time in an answer, as to_rfc3339 writes it; named, so the OpenAPI document has it once
Time = TypeAliasType("Time", Annotated[str, Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$",
                                                  json_schema_extra={"format": "date-time"})])


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_rfc3339(epoch_ms: int) -> str:
    """In integers (a float rounds the last millisecond of 9999 into year 10000), and four digits of
    year whatever the year (strftime wrote year 1 as "1")."""
    return (_EPOCH + timedelta(milliseconds=epoch_ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_epoch_ms(value: str) -> int:
    """Accepts epoch milliseconds or RFC 3339 (a zone is required: a bare local time is ambiguous);
    a ValueError says what is wrong."""
    text = value.strip()
    epoch_ms = ascii_int(text, FIRST_MS, LAST_MS)
    if epoch_ms is not None:
        return epoch_ms
    shape = _RFC3339.fullmatch(text)
    try:
        if shape is None:
            raise ValueError
        dt = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError("must be RFC 3339 or epoch milliseconds within the years 1 to 9999") from None
    if shape[1] is None:
        raise ValueError("must carry a time zone, e.g. 2026-01-01T00:00:00Z")
    # integer arithmetic: float timestamps turn .123 into 122.99999...
    epoch_ms = (dt - _EPOCH) // timedelta(milliseconds=1)
    # within the years as written, but not in UTC (9999-12-31T23:00:00-01:00), which answers carry
    if not FIRST_MS <= epoch_ms <= LAST_MS:
        raise ValueError("must be RFC 3339 or epoch milliseconds within the years 1 to 9999 in UTC")
    return epoch_ms


def parse_time(value: str, field: str) -> int:
    try:
        return parse_epoch_ms(value)
    except ValueError as exc:
        raise InvalidField(f"{field} {exc}", field) from None


def time_range(from_ms: int | None, to_ms: int | None, default_from: Callable[[int], int]) -> tuple[int, int]:
    """`to` defaults to now and `from` to `default_from(to)`, but never before the first time there
    is (year 1), where a range is cut short, or empty; a `from` given must come before `to`."""
    to = now_ms() if to_ms is None else to_ms
    if from_ms is None:
        return min(max(default_from(to), FIRST_MS), to), to
    if to_ms is None and from_ms >= to:
        raise InvalidField("from must be before now, where the range ends when to is not given", "from")
    check_order(from_ms, to)
    return from_ms, to


def check_order(from_ms: int, to_ms: int) -> None:
    """A range given at both ends must end after it begins."""
    if to_ms <= from_ms:
        raise InvalidField("to must be after from", "to")


def counted_to(to_ms: int) -> int:
    """The end of a range of session counts, which are by the minute, and of the crashes beside
    them: `to` rounded up to its minute, so that a last minute's crashes are counted as far as its
    sessions (and within the last time there is)."""
    return min(to_ms - to_ms % -MINUTE_MS, LAST_MS + 1)


def steps(start_ms: int, end_ms: int, step_ms: int) -> int:
    """How many steps from `start_ms` a series to `end_ms` (exclusive) has, the last one partial."""
    return -(-(end_ms - start_ms) // step_ms)


def floor_to(epoch_ms: int, step_ms: int) -> int:
    return epoch_ms - epoch_ms % step_ms


def last_buckets(to_ms: int, step_ms: int, span_ms: int) -> int:
    """Where a range of whole buckets of `step_ms` that ends at `to_ms` (exclusive: a `to` on a
    bucket's start ends the one before), `span_ms` long, begins: the current bucket last."""
    return -(-to_ms // step_ms) * step_ms - span_ms
