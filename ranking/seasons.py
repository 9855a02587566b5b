"""Seasons: a board with a reset schedule (a cron expression in UTC, or daily, weekly, monthly)
starts a new season at each of its times. A season is where its scores and ranking tree are
stored, `<board>@<its start, epoch ms>`: a reset writes nothing and deletes nothing (O(1)), a new
season's first score starts its tree, and every past season stays as it was, queryable. A score
belongs to the season current when capture received it, wherever the batch that applies it ends.

A wipe of a board starts a season too, outside the schedule: the board is empty from then on, and
what it held is the season before, kept readable. So does a change of schedule, which applies from
then on only: each is an epoch of the board (BoardSettings.epochs), with the schedule in force
from it, so an update received before it, applied later, still finds the season it was received in."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Annotated

from cronsim import CronSim, CronSimError
from pydantic import AfterValidator

from ports import MAX_EPOCHS, NEVER_RESETS, BoardSettings, RankingStore
from ports.errors import TooManySeasons

NEVER = NEVER_RESETS

# the names a schedule may have, as cron: midnight UTC, Mondays, the first of the month
ALIASES = {"daily": "0 0 * * *", "weekly": "0 0 * * 1", "monthly": "0 0 1 * *"}
MAX_SCHEDULE_CHARS = 128
# retention drops a season this long after it ended, at the soonest: an update received in it may
# reach its worker late (a failed batch is replayed minutes later), and its end is told up to half
# an hour after it, by a run within the hour after that (ranking.season_ends)
SEASON_PURGE_GRACE_MS = 2 * 3_600_000
# and a board remembers as long the epoch (a wipe, a change of schedule) that ended a season, for
# the same late updates and the same teller (ranking.leaderboard refuses one that would forget it)
REMEMBERED_MS = SEASON_PURGE_GRACE_MS
# boards read at once; past seasons of a board read at once, beyond those it keeps, to drop
BOARDS_A_PAGE = 100
SEASONS_A_READ = 1000


_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# cron's Sunday is 0 or 7, and cronsim keeps what it was told
_SUNDAY = {7: 0}


def _cron(schedule: str) -> str:
    return ALIASES.get(schedule, schedule)


def _spelt(schedule: str) -> str:
    """A schedule's one spelling: its fields one space apart."""
    return " ".join(schedule.split())


def same_schedule(one: str, other: str) -> bool:
    """Whether two schedules are one: an alias and the cron expression it stands for are, and so
    are expressions that fire at the same times by each field (`MON` and `1`, `00` and `0`, `*/1`
    and `*`, Sunday as `0` or `7`)."""
    # either may be stored as sent before spellings were made one (_checked)
    one, other = _spelt(one), _spelt(other)
    return one == other or (NEVER not in (one, other) and _fields(_cron(one)) == _fields(_cron(other)))


_EVERY_DAY = frozenset(range(1, 32))
_EVERY_WEEKDAY = frozenset(range(7))


def _fields(cron: str) -> tuple[object, ...]:
    """What each field of a cron expression takes, as cronsim reads it, with the days it fires on
    as one rule: day of month and weekday both must hold (one of them `*`) or either may, and a
    field that takes every day holds whatever (`1-31 * 1-7` fires daily, as `* * *` does)."""
    read = CronSim(cron, _EPOCH)
    weekdays = frozenset(_SUNDAY.get(day, day) if isinstance(day, int) else (_SUNDAY.get(day[0], day[0]), *day[1:])
                         for day in read.weekdays)
    days = frozenset(read.days)
    every_day, every_weekday = days >= _EVERY_DAY, weekdays >= _EVERY_WEEKDAY
    if (every_day and every_weekday) or (not read.day_and and (every_day or every_weekday)):
        rule: tuple[object, ...] = ("daily",)
    elif every_day:
        rule = ("weekdays", weekdays)
    elif every_weekday:
        rule = ("days", days)
    else:
        rule = ("both" if read.day_and else "either", days, weekdays)
    return read.minutes, read.hours, read.months, rule


# a range of one value with a step (`5-5/7`): cron reads the value alone, cronsim from it to the
# field's last value
_ONE_VALUE_STEPPED = re.compile(r"(?:^|,)(\w+)-(\w+)/\d+(?=,|$)")


def _one_value_stepped(cron: str) -> str | None:
    for field in cron.split():
        for first, last in _ONE_VALUE_STEPPED.findall(field):
            if first.lower() == last.lower():
                return f"{first}-{last}"
    return None


def _checked(sent: str) -> str:
    """The schedule in one spelling (fields one space apart): another spelling of the same would be
    a change of schedule, which starts a season."""
    if len(sent) > MAX_SCHEDULE_CHARS:
        raise ValueError(f"a schedule is at most {MAX_SCHEDULE_CHARS} characters")
    schedule = _spelt(sent)
    if schedule == NEVER:
        return schedule
    cron = _cron(schedule)
    # cronsim also takes a sixth field, seconds: seasons are by the minute (season_start)
    if len(cron.split()) != 5:
        raise ValueError(f"a reset is {NEVER}, {', '.join(ALIASES)} or a cron expression of five fields: minute "
                         "hour day month weekday (UTC)")
    if (stepped := _one_value_stepped(cron)) is not None:
        raise ValueError(f"{stepped} with a step is one value to cron, and would be read as from it to the field's "
                         f"end: write {stepped.partition('-')[0]} alone, or the range meant")
    try:
        # and fires, both ways: a day that no month has (30 February) never does
        next(CronSim(cron, _EPOCH))
        next(CronSim(cron, _EPOCH, reverse=True))
    except (CronSimError, StopIteration) as error:
        raise ValueError(f"not a cron expression that fires (minute hour day month weekday, UTC) nor "
                         f"{', '.join(ALIASES)}: {error or 'it never fires'}") from None
    return schedule


Schedule = Annotated[str, AfterValidator(_checked)]


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def season_start(schedule: str, at_ms: int, epochs: Sequence[tuple[int, str]] = ()) -> int | None:
    """The start of the season current at `at_ms` (epoch ms), by the schedule in force then: its
    last reset, or the epoch that put it in force (a wipe, a change of schedule), whichever came
    later; None for the board's first season. A score received at the very time of a reset or an
    epoch belongs to the new season."""
    since, in_force = _in_force(schedule, at_ms, epochs)
    scheduled = 0 if in_force == NEVER else _season_of_minute(in_force, at_ms // _MINUTE_MS)
    return max(since, scheduled) or None


def _in_force(schedule: str, at_ms: int, epochs: Sequence[tuple[int, str]]) -> tuple[int, str]:
    """The last epoch by `at_ms` and its schedule (0 and `schedule` without epochs)."""
    if not epochs:
        return 0, schedule
    # before the oldest it remembers (MAX_EPOCHS): that one's schedule, from the start
    return next(((s, e) for s, e in reversed(epochs) if s <= at_ms), (0, epochs[0][1]))


def next_season(schedule: str, at_ms: int, epochs: Sequence[tuple[int, str]] = ()) -> int | None:
    """When the season current at `at_ms` ends: by the schedule in force then, or at an epoch
    still to come (a wipe's or a change's season, a moment after its request), whichever is first."""
    coming = [start for start, _ in epochs if start > at_ms]
    by_schedule = next_reset(_in_force(schedule, at_ms, epochs)[1], at_ms)
    return min([*coming, *([] if by_schedule is None else [by_schedule])], default=None)


def started(settings: BoardSettings, at_ms: int, schedule: str) -> tuple[tuple[int, str], ...]:
    """The board's epochs once a season starts at `at_ms` under `schedule` (a wipe: the same
    schedule; a change of schedule: the new one); the last MAX_EPOCHS, in time order. An epoch
    comes a moment after its request (ranking.leaderboard.EPOCH_DELAY_MS): one already at `at_ms`
    (a change of schedule made in the moment before a wipe's season starts) starts under this
    `schedule`, and so do those after it. TooManySeasons where the board would forget a season
    that ended less than REMEMBERED_MS before `at_ms`."""
    history = settings.epochs or ((0, settings.reset),)
    # sorted: epochs stored before this kept them in order may not be
    before = tuple(sorted(epoch for epoch in history if epoch[0] < at_ms))
    after = tuple(sorted((start, schedule) for start, _ in history if start > at_ms))
    epochs = (*before, (at_ms, schedule), *after)
    kept = epochs[-MAX_EPOCHS:]
    # the season of the last epoch forgotten ended at the first kept
    if len(kept) < len(epochs) and at_ms - kept[0][0] < REMEMBERED_MS:
        raise TooManySeasons(
            f"leaderboard {settings.board} remembers the starts of its last {MAX_EPOCHS} seasons (its first, then "
            f"each wipe and change of schedule) for {REMEMBERED_MS // 3_600_000} hours at least, to place late scores "
            "and tell the seasons' ends, and this would forget one younger",
            -(-(kept[0][0] + REMEMBERED_MS - at_ms) // 1000))
    return kept


def forgotten_before(settings: BoardSettings) -> int | None:
    """Before when the board no longer knows its seasons: the oldest epoch it kept, once it forgot
    those before it; None while it knows them all."""
    oldest = min((start for start, _ in settings.epochs), default=0)
    return oldest or None


_MINUTE_MS = 60_000


@functools.lru_cache(maxsize=4096)
def _season_of_minute(schedule: str, minute: int) -> int:
    """Cron is by the minute: the worker asks once a minute and board, not once a score."""
    # its reverse iteration gives the times strictly before the one it starts from
    after = _at((minute + 1) * _MINUTE_MS)
    return _ms(next(CronSim(_cron(schedule), after, reverse=True)))


def next_reset(schedule: str, at_ms: int) -> int | None:
    """When the season current at `at_ms` ends by the schedule."""
    if schedule == NEVER:
        return None
    return _next_of_minute(schedule, at_ms // _MINUTE_MS)


@functools.lru_cache(maxsize=4096)
def _next_of_minute(schedule: str, minute: int) -> int:
    # a read asks on every GET of a board: once a minute and schedule is enough
    return _ms(next(CronSim(_cron(schedule), _at(minute * _MINUTE_MS))))


# the start of a board's first season, until its first reset or wipe: stored under the board's name
FIRST_SEASON = 0


def season_key(board: str, start: int | None) -> str:
    """Where a season's scores and tree are stored: the first under the board's name."""
    return board if not start else f"{board}@{start}"


def every_board(store: RankingStore) -> Iterator[BoardSettings]:
    after = ""
    while True:
        page = store.boards(after, BOARDS_A_PAGE)
        yield from page
        if len(page) < BOARDS_A_PAGE:
            return
        after = page[-1].board


def purge_seasons(store: RankingStore, now_ms: int) -> int:
    """Drops the past seasons of each board beyond its newest `keep_seasons`, once they ended a
    grace ago (never the current one); how many rows went."""
    dropped = 0
    for board in every_board(store):
        current = season_start(board.reset, now_ms, board.epochs)
        if board.keep_seasons is None or current is None:  # None: its one season, current
            continue
        # only those that ended a grace ago: before the season current then
        ended = season_start(board.reset, now_ms - SEASON_PURGE_GRACE_MS, board.epochs) or 0
        while True:  # a board of a minute's schedule makes 1,440 a day, and AWS purges daily
            read = store.seasons(board.board, current, board.keep_seasons + SEASONS_A_READ)
            gone = [start for start in read[board.keep_seasons :] if start < ended]
            dropped += sum(store.drop_season(board.board, start) for start in gone)
            if not gone or len(read) < board.keep_seasons + SEASONS_A_READ:
                break
    return dropped
