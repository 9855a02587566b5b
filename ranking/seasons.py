"""Seasons: a board with a reset schedule (a cron expression in UTC, or daily, weekly, monthly)
starts a new season at each of its times. A season is where its scores and ranking tree are
stored, `<board>@<its start, epoch ms>`: a reset writes nothing and deletes nothing (O(1)), a new
season's first score starts its tree, and every past season stays as it was, queryable. A score
belongs to the season current when capture received it, wherever the batch that applies it ends."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Annotated

from cronsim import CronSim, CronSimError
from pydantic import AfterValidator

from ports import NEVER_RESETS

NEVER = NEVER_RESETS

# the names a schedule may have, as cron: midnight UTC, Mondays, the first of the month
ALIASES = {"daily": "0 0 * * *", "weekly": "0 0 * * 1", "monthly": "0 0 1 * *"}
MAX_SCHEDULE_CHARS = 128


def _cron(schedule: str) -> str:
    return ALIASES.get(schedule, schedule)


def _checked(schedule: str) -> str:
    if schedule == NEVER:
        return schedule
    if len(schedule) > MAX_SCHEDULE_CHARS:
        raise ValueError(f"a schedule is at most {MAX_SCHEDULE_CHARS} characters")
    try:
        CronSim(_cron(schedule), datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as error:
        raise ValueError(f"not a cron expression (minute hour day month weekday, UTC) nor {', '.join(ALIASES)}: "
                         f"{error}") from None
    return schedule


Schedule = Annotated[str, AfterValidator(_checked)]


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def season_start(schedule: str, at_ms: int) -> int | None:
    """The start of the season current at `at_ms` (epoch ms), None for a board that never resets;
    a score received at the very time of a reset belongs to the new season."""
    if schedule == NEVER:
        return None
    return _season_of_minute(schedule, at_ms // _MINUTE_MS)


_MINUTE_MS = 60_000


@functools.lru_cache(maxsize=4096)
def _season_of_minute(schedule: str, minute: int) -> int:
    """Cron is by the minute: the worker asks once a minute and board, not once a score."""
    # its reverse iteration gives the times strictly before the one it starts from
    after = _at((minute + 1) * _MINUTE_MS)
    return _ms(next(CronSim(_cron(schedule), after, reverse=True)))


def next_reset(schedule: str, at_ms: int) -> int | None:
    """When the season current at `at_ms` ends."""
    if schedule == NEVER:
        return None
    return _ms(next(CronSim(_cron(schedule), _at(at_ms))))


def season_key(board: str, start: int | None) -> str:
    """Where a season's scores and tree are stored; a board that never resets keeps its name."""
    return board if start is None else f"{board}@{start}"
