"""A process's settings refuse what would do harm when read (adapters.settings)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from adapters.settings import Settings


@pytest.mark.parametrize("field", ["retention_days", "log_retention_days"])
@pytest.mark.parametrize("days", [0, -1])
def test_a_retention_of_no_days_is_refused_not_taken_as_purge_everything(field: str, days: int) -> None:
    """Found from outside: BLACKBOX_RETENTION_DAYS=0, as someone meaning "keep for ever" might set
    it, made serve's first purge delete every report, count and remembered eventId."""
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: days})


def test_retention_within_bounds_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_RETENTION_DAYS", "1")
    monkeypatch.setenv("BLACKBOX_LOG_RETENTION_DAYS", "3650")
    assert (Settings().retention_days, Settings().log_retention_days) == (1, 3650)
