"""Keyset pages: every listing fetches one row more than its limit to know whether another page
follows; walking the cursors over a sorted table gives every row once, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ports.cursors import decode_cursor, page_of

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
