"""Seasons: a board with a reset schedule (a cron expression in UTC, or daily, weekly, monthly)
starts a new season at each of its times. A season is where its scores and ranking tree are
stored, `<board>@<its start, epoch ms>`: a reset writes nothing and deletes nothing (O(1)), a new
season's first score starts its tree, and every past season stays as it was, queryable. A score
belongs to the season current when capture received it, wherever the batch that applies it ends.

A wipe of a board starts a season too, at once and outside the schedule: the board is empty from
then on, and what it held is the season before, readable until retention removes it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
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


def season_start(schedule: str, at_ms: int, wipes: Sequence[int] = ()) -> int | None:
    """The start of the season current at `at_ms` (epoch ms): the schedule's last reset or the
    board's last wipe, whichever came later (None for a board that never reset nor was wiped); a
    score received at the very time of a reset or wipe belongs to the new season."""
    scheduled = None if schedule == NEVER else _season_of_minute(schedule, at_ms // _MINUTE_MS)
    wiped = max((w for w in wipes if w <= at_ms), default=None)
    if wiped is None or (scheduled is not None and scheduled >= wiped):
        return scheduled
    return wiped


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


# the start of a board's first season, until its first reset or wipe: stored under the board's name
FIRST_SEASON = 0


def season_key(board: str, start: int | None) -> str:
    """Where a season's scores and tree are stored: the first under the board's name."""
    return board if not start else f"{board}@{start}"
