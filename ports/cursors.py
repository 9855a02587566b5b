"""Opaque cursors: where a listing stopped, given out as `nextCursor` and taken back as `cursor`."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence
from enum import StrEnum, unique
from typing import TypeVar

from ports.errors import InvalidField
from ports.limits import INT64_MAX, ascii_int

Row = TypeVar("Row")


@unique
class Kind(StrEnum):
    """Each listing's cursor kind, all in one place: a kind two listings shared let one read the
    other's position as its own."""
    BANS = "n"
    BOARDS = "b"
    # these followed by a digest of their listing's scope (of_scope): the board, sku or webhook
    SEASONS = "e"
    ENTRIES_DESC = "k"
    ENTRIES_ASC = "a"
    PROJECTS = "p"
    REPORTS_ASC = "r"
    REPORTS_DESC = "d"
    SYMBOL_FILES = "y"
    BUILDS = "v"
    SKUS = "s"
    ALERTS = "h"
    DELIVERIES = "w"


def of_scope(kind: str, scope: str) -> str:
    """The cursor kind of one listing among many alike (a board's entries, a sku's builds, a
    webhook's deliveries): a cursor of another's would name a position there, and is refused."""
    return f"{kind}{hashlib.blake2b(scope.encode(), digest_size=4).hexdigest()}:"


def encode_cursor(kind: str, position: str) -> str:
    """A cursor for a listing of this `kind` (one letter) that stopped at `position`."""
    return base64.urlsafe_b64encode(f"{kind}{position}".encode()).decode().rstrip("=")


def decode_cursor(text: str | None, kind: str) -> str | None:
    """The position in a cursor this API gave out for a listing of this kind; a cursor of another
    listing (or of the same one in the other order) is refused, not read as something else."""
    if text is None:
        return None
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = ""
    if not decoded.startswith(kind):
        raise InvalidField("cursor is not one this listing gave out in this order", "cursor")
    return decoded[len(kind):]


def decode_ordered(text: str | None, kind: str) -> tuple[int, str] | None:
    """The position (a number, then a key) in a cursor of a listing ordered by both, as
    `ordered_position` wrote it; None for none."""
    position = decode_cursor(text, kind)
    if position is None:
        return None
    number, _, key = position.partition(":")
    # a number the stores can hold, of ASCII digits (int() takes others, and no more than 4,300)
    value = ascii_int(number, 0, INT64_MAX)
    if value is None:
        raise InvalidField("cursor is not one this listing gave out", "cursor")
    return value, key


def ordered_position(number: int, key: str) -> str:
    return f"{number}:{key}"


def page_of(found: Sequence[Row], limit: int, kind: str,
            position: Callable[[Row], str]) -> tuple[Sequence[Row], str | None]:
    """The first `limit` rows of `found` (fetched as limit + 1, to know whether more remain), and the
    cursor past the last of them when more do."""
    page = found[:limit]
    return page, encode_cursor(kind, position(page[-1])) if len(found) > limit else None
