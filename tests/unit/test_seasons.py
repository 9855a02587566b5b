"""ranking.seasons and the leaderboard's edges that review found: schedules by the minute only and
that fire, metadata JSON can carry, a cursor within int64."""

from __future__ import annotations

import itertools
import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from cronsim import CronSim
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from api.requests import validate
from ports import MAX_EPOCHS, BoardSettings
from ports.cursors import encode_cursor
from ports.errors import InvalidField, TooManySeasons
from ranking import leaderboard
from ranking.model import MAX_METADATA_BYTES, BoardSettingsBody, Score, scores_json
from ranking.season_ends import LOOKING_MS, MAX_AFTER_S
from ranking.seasons import REMEMBERED_MS, Schedule, next_reset, same_schedule, season_start, started
from ranking.tree import DEFAULT_TREE

SCHEDULE = TypeAdapter(Schedule)
T0 = 1_795_000_200_000  # 2026-11-17T11:50:00Z


@pytest.mark.parametrize("schedule", ["30 * * * * *", "0 0 30 2 *", "0 0 * *", "every day", "0 0 * * 8"])
def test_a_schedule_is_five_fields_that_fire(schedule: str):
    """Found in review: cronsim takes a seconds field, and seasons are by the minute (a score at
    10:00:05 got the season of 10:00:30); a date no month has never fires."""
    with pytest.raises(ValidationError):
        SCHEDULE.validate_python(schedule)


@pytest.mark.parametrize("schedule", ["hourly", "0 0 * *", "1 2 3 4 5 6"])
def test_a_refused_schedule_is_told_every_form_a_reset_takes(schedule: str):
    """Found by a newcomer: `hourly` was told only that a cron expression has five fields."""
    with pytest.raises(ValidationError) as refused:
        SCHEDULE.validate_python(schedule)
    assert all(form in str(refused.value) for form in ("never", "daily", "weekly", "monthly", "five fields"))


@pytest.mark.parametrize(("sent", "kept"), [("0 0 1 1\n*", "0 0 1 1 *"), (" 0  0 * * 1\t", "0 0 * * 1"),
                                            ("daily ", "daily")])
def test_a_schedule_is_kept_in_one_spelling(sent: str, kept: str):
    """Found from outside: spaces, tabs and newlines were kept as sent, so a PUT of the same
    schedule spelt otherwise was a change of schedule, and started a season."""
    assert SCHEDULE.validate_python(sent) == kept


@pytest.mark.parametrize(("one", "other"), [
    ("weekly", "0 0 * * MON"), ("daily", "00 00 * * *"), ("daily", "0 0 */1 * *"), ("0 0 * * 0", "0 0 * * 7"),
    ("0 0 * * SUN", "0 0 * * 7"), ("monthly", "0 0 1 JAN-DEC *"), ("weekly", "0 0 * * 1"), ("daily", " 0  0 * * *"),
    # found from outside: day fields that take every day were a change of the rule they combine by
    ("daily", "0 0 1-31 * 1-7"), ("daily", "0 0 1-31 * 1"), ("daily", "0 0 1-31 * 0-7")])
def test_the_same_schedule_spelt_otherwise_is_no_change(one: str, other: str):
    """Found from outside: the same schedule with a day's name, a leading zero or a step of one was a
    change, and a PUT of it started a new, empty season of a live board."""
    assert same_schedule(one, other) and same_schedule(other, one)


@pytest.mark.parametrize(("one", "other"), [
    ("weekly", "0 0 * * 2"), ("daily", "0 0 */2 * *"), ("0 0 * * 1", "0 0 1-31 * 1"), ("daily", "never"),
    ("0 0 L * *", "0 0 28-31 * *")])
def test_another_schedule_is_a_change(one: str, other: str):
    assert not same_schedule(one, other) and not same_schedule(other, one)


_DAYS = ["*", "1-31", "*/1", "1-15", "16-31", "1-31/2", "*/2", "L", "1,15"]
_WEEKDAYS = ["*", "0-6", "1-7", "0-7", "1-5", "0,6", "MON-FRI", "SAT,SUN", "*/2", "1"]


@given(st.sampled_from(_DAYS), st.sampled_from(_WEEKDAYS), st.sampled_from(_DAYS), st.sampled_from(_WEEKDAYS))
def test_two_schedules_are_one_exactly_when_they_fire_on_the_same_days(days: str, weekdays: str, other_days: str,
                                                                      other_weekdays: str):
    """Against a brute force: the days each fires on over four years (a leap day, every weekday of
    every month length)."""
    one, other = f"0 0 {days} * {weekdays}", f"0 0 {other_days} * {other_weekdays}"

    def fired(cron: str) -> list[datetime]:
        firings = CronSim(cron, datetime(2027, 1, 1, tzinfo=UTC))
        return list(itertools.takewhile(lambda at: at.year < 2031, firings))

    assert same_schedule(one, other) == (fired(one) == fired(other))


@pytest.mark.parametrize("schedule", ["0 0 5-5/7 * *", "0 0 * * 0-0/1", "0 0 * * MON-mon/2", "3-3/5 * * * *",
                                      "0 0 1,5-5/2 * *"])
def test_a_range_of_one_value_with_a_step_is_refused(schedule: str):
    """Found from outside: cron reads 5-5/7 as 5, and cronsim as 5-31/7: a board reset on the 5th,
    12th, 19th and 26th where its studio asked for the 5th."""
    with pytest.raises(ValidationError, match="with a step is one value to cron"):
        SCHEDULE.validate_python(schedule)
    assert SCHEDULE.validate_python("0 0 5-12/7 * *") == "0 0 5-12/7 * *"


def test_a_change_of_schedule_applies_from_then_on():
    """Found in review: the new schedule was applied to every past receivedAt, so a late update of
    a daily season landed in a weekly one."""
    daily = BoardSettings("b", reset="daily")
    changed_at = T0 + 3_600_000
    weekly = BoardSettings("b", reset="weekly", epochs=started(daily, changed_at, "weekly"))
    before, after = T0 + 60_000, changed_at + 60_000
    assert season_start(weekly.reset, before, weekly.epochs) == season_start("daily", before)
    assert season_start(weekly.reset, after, weekly.epochs) == changed_at  # the change starts a season
    assert next_reset("weekly", after) > changed_at


def test_a_wipe_still_starts_its_season_after_a_change_of_schedule_before_it():
    """Found from outside: a PUT of another schedule within the second before a wipe's season
    started put its epoch after the wipe's, and the season the wipe answered never began."""
    daily = BoardSettings("b", reset="daily")
    wiped_at = T0 + 3_600_000
    wiped = BoardSettings("b", reset="daily", epochs=started(daily, wiped_at + 1000, "daily"))
    weekly = BoardSettings("b", reset="weekly", epochs=started(wiped, wiped_at + 500, "weekly"))
    assert season_start(weekly.reset, wiped_at + 700, weekly.epochs) == wiped_at + 500
    assert season_start(weekly.reset, wiped_at + 60_000, weekly.epochs) == wiped_at + 1000
    assert season_start(weekly.reset, wiped_at + 86_400_000, weekly.epochs) == wiped_at + 1000  # weekly since
    # found in review: epochs stored out of order before this was mended are put in order
    stored = BoardSettings("b", reset="weekly",
                           epochs=((0, "daily"), (wiped_at + 1000, "daily"), (wiped_at + 500, "weekly")))
    assert [start for start, _ in started(stored, wiped_at + 60_000, "monthly")] == [
        0, wiped_at + 500, wiped_at + 1000, wiped_at + 60_000]


def test_metadata_holds_what_json_holds():
    with pytest.raises(ValidationError):  # found in review: 1e400 became infinity, then null
        Score.model_validate_json('{"board": "b", "playerId": "p", "score": 1, "metadata": {"x": 1e400}}')


def test_metadata_is_bounded_as_answered_and_every_ascii_one_the_counts_allow_fits():
    """Found from outside: 16 keys of 64 characters and values of 128 outside ASCII made an entry 37 KB
    as answered (12 bytes a character), and a top page or a friends list of 1,000 entries 38 MB."""
    wide = "\U0001d400"
    with pytest.raises(ValidationError) as refused:
        Score.model_validate({"board": "b", "playerId": "p", "score": 1,
                              "metadata": {f"{wide * 62}{k:02}": wide * 128 for k in range(16)}})
    assert [error["loc"] for error in refused.value.errors()] == [("metadata",)]
    most = {f"{'k' * 62}{k:02}": "v" * 128 for k in range(16)}
    assert Score.model_validate({"board": "b", "playerId": "p", "score": 1, "metadata": most}).metadata == most


@pytest.mark.parametrize("number", [str(2**63), str(-(2**63) - 1), "123456789012345678901234567890"])
def test_metadata_refuses_an_integer_past_int64_rather_than_keep_a_float(number: str):
    """Found from outside: 2**63 was taken, and read back as 9.223372036854776e+18."""
    with pytest.raises(ValidationError):
        Score.model_validate_json(f'{{"board": "b", "playerId": "p", "score": 1, "metadata": {{"x": {number}}}}}')
    kept = Score.model_validate_json('{"board": "b", "playerId": "p", "score": 1, "metadata": {"x": 7, "y": 0.5}}')
    assert kept.metadata == {"x": 7, "y": 0.5} and isinstance(kept.metadata["x"], int)


@pytest.mark.parametrize("value", [str(2**63), "[1]", '{"x": 1}', '"' + "s" * 129 + '"'])
def test_a_refused_metadata_value_is_told_what_it_may_be(value: str):
    """Found from outside: a list, an object or an integer past int64 was told "Input should be a
    valid string", the first of the values metadata takes."""
    with pytest.raises(ValidationError) as refused:
        Score.model_validate_json(f'{{"board": "b", "playerId": "p", "score": 1, "metadata": {{"x": {value}}}}}')
    [error] = refused.value.errors()
    assert error["loc"] == ("metadata", "x") and "an integer within int64" in error["msg"], error


@pytest.mark.parametrize(("first", "retry"), [
    ('"metadata": {"a": 1, "b": 2}', '"metadata": {"b": 2, "a": 1}'),
    ('"subscore": 0', '"board": "b"'),
])
def test_a_retry_that_means_the_same_carries_the_same_text(first: str, retry: str):
    """Found from outside: a retried attempt whose metadata keys came in another order, or whose
    subscore of 0 was left out (absent: 0), was refused 409 as another body under the same key."""
    texts = [scores_json([Score.model_validate_json(f'{{"board": "b", "playerId": "p", "score": 1, {part}}}')])
             for part in (first, retry)]
    assert texts[0] == texts[1]


@pytest.mark.parametrize("score", [str(2**63), str(-(2**63) - 1), "7x"])
def test_a_cursor_outside_int64_is_refused_as_the_contract_says(score: str):
    """Found in review: this cursor once had another listing's kind, refused whatever its score."""
    cursor = encode_cursor(leaderboard.entries_kind(BoardSettings("b")), f":{score}:0:p")
    with pytest.raises(InvalidField, match=r"cursor is not one this listing gave out$"):
        leaderboard.top(_NoStore(), DEFAULT_TREE, "b", cursor=cursor)


class _NoStore:
    """Enough of a store to reach the cursor: a board that never resets."""

    def snapshot(self) -> AbstractContextManager[None]:
        return nullcontext()

    def get_board(self, board: str) -> BoardSettings:
        return BoardSettings(board)


def test_a_board_s_counts_may_be_written_as_json_writes_a_whole_number():
    # found from outside: the contract takes `7.0` and `7e0` for an integer, and a board's counts refused them
    body = BoardSettingsBody.model_validate_json('{"keepSeasons": 1.0, "maxAttempts": 3e0, "maxPlayers": 2.0}')
    assert (body.keepSeasons, body.maxAttempts, body.maxPlayers) == (1, 3, 2)
    assert type(body.keepSeasons) is int
    for fraction in ('{"keepSeasons": 1.5}', '{"maxAttempts": 0.0}', '{"maxPlayers": true}'):
        with pytest.raises(ValidationError):
            BoardSettingsBody.model_validate_json(fraction)


def test_a_board_name_refused_says_what_a_name_is_not_a_regex():
    """Found by a newcomer: "time trial" was told `String should match pattern '^(?:[A-Za-z0-9_:-]…'`."""
    with pytest.raises(InvalidField) as refused:
        validate(Score, {"board": "time trial", "playerId": "p", "score": 1})
    assert refused.value.field == "board"
    assert str(refused.value) == "board: 1 to 128 of A-Z a-z 0-9 . _ : - (not . or ..)"


def test_metadata_of_quotes_within_the_bound_it_was_taken_under_is_taken_still():
    """Found in review: a bound counted as Lambda carries the answer refused metadata of `"`s a score
    had been accepted with, so its retry (the same body) would be 400, not its first answer."""
    metadata = {chr(ord("a") + k): '"' * 95 for k in range(16)}
    assert len(json.dumps(metadata)) == 3184
    assert Score.model_validate({"board": "b", "playerId": "p", "score": 1, "metadata": metadata}).metadata


def test_metadata_accepted_answers_within_its_bound_as_the_api_writes_it():
    """Found in review: the bound was measured without the spaces the API's JSON has after `:` and `,`,
    so metadata it took answered 3,231 bytes."""
    values = ['"' * 31 + "v" * 97] + ["v" * 128] * 15  # 3,200 bytes without those spaces
    metadata = {f"{'k' * 62}{k:02}": value for k, value in enumerate(values)}
    assert len(json.dumps(metadata, separators=(",", ":"))) == 3200
    try:
        kept = Score.model_validate({"board": "b", "playerId": "p", "score": 1, "metadata": metadata}).metadata
    except ValidationError:
        return
    assert kept is not None and len(json.dumps(kept)) <= MAX_METADATA_BYTES


def test_a_board_forgets_no_season_a_late_score_or_its_end_may_still_need():
    """Found in review: a board that was wiped more than MAX_EPOCHS times within the hour the
    season-end teller looks back (or a replay's lag) forgot the seasons it still had to place
    scores in and to tell the ends of. Such a wipe or change of schedule is refused until the
    epoch it would forget is old enough."""
    settings = BoardSettings("b")
    for n in range(MAX_EPOCHS - 1):
        settings = replace(settings, epochs=started(settings, T0 + 1000 * n, "never"))
    assert len(settings.epochs) == MAX_EPOCHS
    later = T0 + 1000 * MAX_EPOCHS
    with pytest.raises(TooManySeasons) as refused:
        started(settings, later, "never")
    assert (refused.value.status, refused.value.code) == (409, "too_many_seasons")
    # found from outside: it said 128 wipes had started seasons, after 127 and the board's first
    assert f"starts of its last {MAX_EPOCHS} seasons (its first, then each wipe" in str(refused.value)
    assert refused.value.retry_after_s == -(-(T0 + REMEMBERED_MS - later) // 1000)
    assert started(settings, T0 + REMEMBERED_MS, "never")[0] == (T0, "never")  # the first season forgotten now
    assert REMEMBERED_MS >= LOOKING_MS + MAX_AFTER_S * 1000  # every end the teller may tell is remembered
