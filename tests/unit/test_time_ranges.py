"""A query's time range: a refusal names a parameter the client sent."""

from __future__ import annotations

import pytest

from ports.errors import InvalidField
from ports.timeutil import HOUR_MS, now_ms, time_range


def test_a_from_after_now_with_no_to_is_refused_naming_from():
    """Found from outside: `?from=2099-01-01T00:00:00Z` answered `"field": "to"`, which the client never sent."""
    with pytest.raises(InvalidField) as refused:
        time_range(now_ms() + HOUR_MS, None, lambda to: to - HOUR_MS)
    assert refused.value.field == "from" and "now" in str(refused.value)


def test_a_range_given_at_both_ends_that_ends_first_is_refused_naming_to():
    with pytest.raises(InvalidField) as refused:
        time_range(5_000, 3_000, lambda to: to - HOUR_MS)
    assert refused.value.field == "to"
    assert time_range(3_000, 5_000, lambda to: to - HOUR_MS) == (3_000, 5_000)
