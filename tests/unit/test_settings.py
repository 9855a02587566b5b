"""A process's settings refuse what would do harm when read (adapters.settings)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from adapters.settings import Settings
from ports.limits import MAX_RETENTION_DAYS
from ranking.season_ends import LOOKING_MS, MAX_AFTER_S
from ranking.seasons import SEASON_PURGE_GRACE_MS


@pytest.mark.parametrize("field", ["retention_days", "log_retention_days"])
@pytest.mark.parametrize("days", [0, -1])
def test_a_retention_of_no_days_is_refused_not_taken_as_purge_everything(field: str, days: int) -> None:
    """Found from outside: BLACKBOX_RETENTION_DAYS=0, as someone meaning "keep for ever" might set
    it, made serve's first purge delete every report, count and remembered eventId."""
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: days})


def test_retention_within_bounds_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_RETENTION_DAYS", "1")
    monkeypatch.setenv("BLACKBOX_LOG_RETENTION_DAYS", str(MAX_RETENTION_DAYS))
    assert (Settings().retention_days, Settings().log_retention_days) == (1, MAX_RETENTION_DAYS)


def test_a_season_end_is_told_before_retention_may_drop_its_season() -> None:
    """Found from outside: BLACKBOX_SEASON_END__AFTER_S took up to a day, and a board that keeps
    few seasons had the one that ended purged an hour after its end, before its top was told."""
    with pytest.raises(ValidationError, match="after_s"):
        Settings(season_end={"after_s": MAX_AFTER_S + 1})
    assert Settings(season_end={"after_s": MAX_AFTER_S}).season_end.after_s == MAX_AFTER_S
    # and the teller looks at an end for an hour after that wait
    assert SEASON_PURGE_GRACE_MS > MAX_AFTER_S * 1000 + LOOKING_MS
