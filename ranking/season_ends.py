"""A season's end, told once: when a board's season is over (a reset, a wipe, a change of
schedule, the end of the board's window), its final top is raised as a `season-end` alert,
delivered to the webhooks that take that kind (webhooks.delivery). The alert's key names the board
and the season, and the outbox keeps one alert a key, so however often the job runs, and on however
many processes, a season's end is told once.

"Final": an update received before the end may be applied by the board's worker after it: a
moment after in the common case (its lag is well under a second at the rates of BENCHMARKS.md), or
minutes after when its batch failed and is replayed (every 5 minutes in AWS). The top is read
`after_s` after the end (6 minutes by default); an update that lands later still is in the season,
not in its told top."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from pydantic import BaseModel, Field

from ports import BoardSettings, RankingStore
from ports.issues import Alert, IssueStore
from ports.timeutil import to_rfc3339
from ranking import leaderboard
from ranking.seasons import FIRST_SEASON, every_board, season_start
from ranking.tree import Tree

SEASON_END = "season-end"
# the entries of the final top an alert carries
FINAL_TOP = 10
# an end is looked at this long after `after_s`, at each run of the job, then left (told or not)
LOOKING_MS = 3_600_000
# the longest `after_s`: with LOOKING_MS, within the time retention leaves a past season
# (SEASON_PURGE_GRACE_MS), so no end is dropped before it could be told
MAX_AFTER_S = 1800.0


class SeasonEndPolicy(BaseModel):
    """e.g. BLACKBOX_SEASON_END__AFTER_S=1: how long after a season's end its top is told;
    LOOK_EVERY_S: how often serve looks for ends (in AWS, each run of the webhooks function)."""

    after_s: float = Field(default=360.0, ge=0, le=MAX_AFTER_S)
    look_every_s: float = Field(default=10.0, ge=0.1, le=3600)


def season_key_of_alert(board: str, start: int) -> str:
    return f"{SEASON_END}:{board}:{start}"


def tell_season_ends(store: RankingStore, issues: IssueStore, tree: Tree, policy: SeasonEndPolicy, now_ms: int) -> int:
    """Raises the alerts of the seasons that ended; how many were new."""
    told = _TOLD.setdefault(issues, set())
    if len(told) > MOST_REMEMBERED:
        told.clear()

    def asked(key: str) -> bool:
        if key not in told and issues.raised(key):
            told.add(key)
        return key in told

    new = 0
    for alert in ended_seasons(store, tree, now_ms, round(policy.after_s * 1000), told=asked):
        new += issues.raise_alert(alert)
        told.add(alert.key)
    return new


# the ends each outbox holds, as this process has seen: once told, an end stays told (the outbox
# keeps its alert longer than the hour a run looks at it), so a run asks of an end once
_TOLD: weakref.WeakKeyDictionary[IssueStore, set[str]] = weakref.WeakKeyDictionary()
MOST_REMEMBERED = 100_000


def _ends(board: BoardSettings, at: int) -> dict[int, int]:
    """The start and end of each season of `board` that ended within LOOKING_MS before `at`: those
    a reset or an epoch ended, and the one its window's end (`endsAt`) ended, after which its
    seasons take no scores. Every one: a run may not have come since the last."""
    ends = {}
    start = season_start(board.reset, at, board.epochs)
    while start is not None and at - start <= LOOKING_MS:
        before = season_start(board.reset, start - 1, board.epochs)
        if board.ends_at is None or start <= board.ends_at:
            ends[before or FIRST_SEASON] = start
        start = before
    if board.ends_at is not None and 0 <= at - board.ends_at <= LOOKING_MS:
        ends[season_start(board.reset, board.ends_at - 1, board.epochs) or FIRST_SEASON] = board.ends_at
    return ends


def ended_seasons(store: RankingStore, tree: Tree, now_ms: int, after_ms: int,
                  told: Callable[[str], bool]) -> list[Alert]:
    """For each board that resets (or was wiped), the seasons that ended within LOOKING_MS before
    `after_ms` ago and hold scores, each as an alert with its final top (raise each: the outbox
    keeps one a key). A job that does not run in that hour leaves those ends untold."""
    alerts = []
    at = now_ms - after_ms
    for board in every_board(store):
        ends = _ends(board, at)
        # which of them hold scores: among the seasons from the last of them back (a season after
        # those may hold scores too, one taken before a window closed behind it)
        held = set(store.seasons(board.board, max(ends) + 1, len(ends))) if ends else set()
        for start, ended in ends.items():
            # nothing to tell; or told by an earlier run (within the hour a run looks at an end)
            if start not in held or told(season_key_of_alert(board.board, start)):
                continue
            top = leaderboard.top(store, tree, board.board, limit=FINAL_TOP, season=start)["entries"]
            if not top:  # written to, by deletes alone, or every record deleted since
                continue
            lines = [f"{e['rank']}. {e['playerId']} ({e['score']})" for e in top]
            alerts.append(Alert(season_key_of_alert(board.board, start), SEASON_END, now_ms, {
                "text": f"Season of {board.board} from {to_rfc3339(start)} ended at {to_rfc3339(ended)}"
                        + ": " + ", ".join(lines),
                "board": board.board, "season": to_rfc3339(start), "endedAt": to_rfc3339(ended), "top": top,
            }))
    return alerts
