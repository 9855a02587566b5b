"""Keyset pages: every listing fetches one row more than its limit to know whether another page
follows; walking the cursors over a sorted table gives every row once, in order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ports.cursors import decode_cursor, decode_ordered, encode_cursor, page_of
from ports.errors import InvalidField
from ports.limits import INT64_MAX

KIND = "t"


@given(st.lists(st.integers(0, 10**6), unique=True), st.integers(1, 7))
def test_walking_the_cursors_gives_every_row_once_in_order(rows: list[int], limit: int) -> None:
    table = sorted(rows)
    walked: list[int] = []
    cursor: str | None = None
    while True:
        after = decode_cursor(cursor, KIND)
        found = [r for r in table if after is None or r > int(after)][:limit + 1]
        page, cursor = page_of(found, limit, KIND, str)
        walked += page
        assert len(page) <= limit
        if cursor is None:
            break
        assert len(page) == limit
    assert walked == table


@pytest.mark.parametrize("number", ["9" * 5000, str(INT64_MAX + 1), "", "-1", "\u00b2"])
def test_an_ordered_cursor_holds_a_number_the_stores_can_hold(number: str) -> None:
    """Found from outside: 5,000 digits, past what int() converts, was a ValueError and a 500."""
    with pytest.raises(InvalidField):
        decode_ordered(encode_cursor(KIND, f"{number}:key"), KIND)
    assert decode_ordered(encode_cursor(KIND, f"{INT64_MAX}:key"), KIND) == (INT64_MAX, "key")
