"""Release health: the builds of a sku, and of one build over a window its sessions, adoption,
crash-free sessions and players, crash rate, and the change against the build before it. Sessions
and players come from the session counter's release counts, crashes from the crash index (each
report by its buildVersion and receivedAt)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import CrashIndex, SessionCounters
from ports.cursors import Kind, decode_ordered, of_scope, ordered_position, page_of
from ports.errors import InvalidField, NotFound
from ports.issues import build_order
from ports.limits import INT64_MAX
from ports.releases import DAY_MS, OUTCOMES, BuildSeen, Outcome, ReleaseCounts
from ports.timeutil import HOUR_MS, Time, counted_to, floor_to, last_buckets, time_range, to_rfc3339

MAX_BUILDS = 100
MAX_WINDOW_DAYS = 90
Interval = Literal["hour", "day"]
_STEP = {"hour": HOUR_MS, "day": DAY_MS}
_DEFAULT_DAYS = 7
_CURSOR_KIND = Kind.BUILDS

Share = Annotated[float | None, Field(ge=0, le=1)]


@with_config(ConfigDict(extra="forbid"))
class ReleaseBuild(TypedDict):
    """A build, with the first and last minute it had a session in."""

    build: str
    firstSeen: Time
    lastSeen: Time


@with_config(ConfigDict(extra="forbid"))
class BuildPage(TypedDict):
    builds: list[ReleaseBuild]
    nextCursor: str | None


@with_config(ConfigDict(extra="forbid"))
class SessionOutcomes(TypedDict):
    ok: Annotated[int, Field(ge=0)]
    crashed: Annotated[int, Field(ge=0)]
    abnormal: Annotated[int, Field(ge=0)]
    errored: Annotated[int, Field(ge=0)]


@with_config(ConfigDict(extra="forbid"))
class ReleasePoint(TypedDict):
    start: Time
    sessions: Annotated[int, Field(ge=0)]
    crashedSessions: Annotated[int, Field(ge=0)]
    adoption: Annotated[Share, Field(description="the build's share of the sku's sessions; null without any")]
    crashFreeSessions: Annotated[Share, Field(description="1 - crashedSessions/sessions; null without sessions")]
    crashes: Annotated[int, Field(ge=0)]
    crashRate: Annotated[float | None, Field(ge=0, description="crashes/sessions; null without sessions")]


@with_config(ConfigDict(extra="forbid"))
class ReleaseFigures(TypedDict):
    build: str
    firstSeen: Time
    lastSeen: Time
    sessions: Annotated[int, Field(ge=0)]
    outcomes: SessionOutcomes
    adoption: Annotated[Share, Field(description="the build's share of the sku's sessions; null without any")]
    crashFreeSessions: Annotated[Share, Field(description="1 - crashed sessions/sessions; null without sessions")]
    players: Annotated[int, Field(ge=0, description=(
        "distinct players of the build's sessions with a playerId, over the UTC days the window touches"))]
    crashedPlayers: Annotated[int, Field(ge=0, description="those of them with a crashed session")]
    crashFreePlayers: Annotated[Share, Field(description="1 - crashedPlayers/players; null without players")]
    crashes: Annotated[int, Field(ge=0, description="crash reports of the build (buildVersion) received in the window")]
    crashRate: Annotated[float | None, Field(ge=0, description="crashes/sessions; null without sessions")]


@with_config(ConfigDict(extra="forbid"))
class ReleaseChange(TypedDict):
    """This build's figure less the previous build's, over the same window; null where either is."""

    adoption: float | None
    crashFreeSessions: float | None
    crashFreePlayers: float | None
    crashRate: float | None


@with_config(ConfigDict(extra="forbid"))
class ReleaseHealth(ReleaseFigures):
    sku: str
    start: Time
    end: Time
    interval: Interval
    previous: Annotated[ReleaseFigures | None, Field(
        description=("the build first seen before this one (of those first seen in its minute, the one before it "
                     "in build order; else of those of the latest minute before, the last in build order), over "
                     "the same window; null for the first"))]
    change: ReleaseChange | None
    series: list[ReleasePoint]


# builds read a page at a time
_PAGE = 1000
# a minute's builds are listed in build order up to this many, and past them in text order, as read:
# a game's shipped key can make any number of builds in a minute (100,000 took 1.2 to 1.7 s a read
# to sort), and no studio's deploys make a thousand
SORTED_BUILDS = 1000


def _place(build: str) -> tuple[object, str]:
    """A build's place among those first seen in its minute: build order (ports.issues.build_order),
    the text breaking a tie."""
    return build_order(build), build


def _read(counters: ReleaseCounts, sku: str, before: tuple[int, str] | None) -> Iterator[BuildSeen]:
    """The sku's builds before `before` (None: from the newest), newest first by (first_seen, build
    as text), a page at a time."""
    while True:
        page = counters.builds(sku, before, _PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        before = (page[-1].first_seen, page[-1].build)


def _newest_first(counters: ReleaseCounts, sku: str, minute: int | None,
                  after: str | None = None) -> Iterator[BuildSeen]:
    """The sku's builds first seen in `minute` or before (None: from the newest), newest first, and
    those of `minute` listed after the build `after` only, where given. Of a minute's builds, the
    last in build order first (a studio that points its DSN at Blackbox sees its live builds first
    all in one minute: as text, 1.10 came before 1.9); of more than SORTED_BUILDS, the last as text
    first, as read."""
    if minute is not None and minute >= INT64_MAX:
        # none after the last minute there is (a cursor may name it): from the newest
        minute = after = None
    for at, group in itertools.groupby(_read(counters, sku, None if minute is None else (minute + 1, "")),
                                       key=lambda seen: seen.first_seen):
        rest = iter(group)
        head = list(itertools.islice(rest, SORTED_BUILDS + 1))
        crowded = len(head) > SORTED_BUILDS
        if after is None or at != minute:
            yield from itertools.chain(head, rest) if crowded else _last_first(head)
        elif not crowded:
            mine = _place(after)
            yield from (seen for seen in _last_first(head) if _place(seen.build) < mine)
        else:
            # as read, those after `after` are those before it as text: read from there, not the
            # minute from its start, then the minutes before
            yield from _of_minute(counters, sku, at, after)
            yield from _newest_first(counters, sku, at - 1)
            return


def _last_first(builds: list[BuildSeen]) -> list[BuildSeen]:
    return sorted(builds, key=lambda seen: _place(seen.build), reverse=True)


def _of_minute(counters: ReleaseCounts, sku: str, minute: int, before: str) -> Iterator[BuildSeen]:
    """The builds first seen in `minute` before `before` as text, the last first."""
    return itertools.takewhile(lambda seen: seen.first_seen == minute, _read(counters, sku, (minute, before)))


def previous_build(counters: ReleaseCounts, sku: str, build: str, first_seen: int) -> BuildSeen | None:
    """The build before `build` (first seen at `first_seen`): the one listed after it, newest first;
    of builds first seen in its minute, the one before it in build order, else the last in build
    order of those first seen in the latest minute before."""
    return next(_newest_first(counters, sku, first_seen, build), None)


def previous_builds(counters: ReleaseCounts, sku: str, first_seen: Mapping[str, int], *,
                    most: int | None = None) -> dict[str, BuildSeen | None]:
    """previous_build of each of these builds (by when each was first seen), in one walk of the
    sku's builds, newest first: a build's previous is the one listed after it. The walk lists
    `most` builds at most: one it did not reach then has None."""
    found: dict[str, BuildSeen | None] = {}
    reached_end = True
    if first_seen:
        listed = _newest_first(counters, sku, max(first_seen.values()))
        # one more than `most`: the last one's previous
        pairs = itertools.pairwise(itertools.chain(itertools.islice(listed, None if most is None else most + 1),
                                                   [None]))
        for n, (seen, before) in enumerate(pairs):
            if n == most:
                reached_end = False
                break
            if seen is not None and seen.build in first_seen:
                found[seen.build] = before
                if len(found) == len(first_seen):
                    break
    # a build the listing does not hold (not yet written there): the lookup of one build
    return found | {build: previous_build(counters, sku, build, at) if reached_end else None
                    for build, at in first_seen.items() if build not in found}


def list_builds(counters: SessionCounters, sku: str, *, limit: int = 20, cursor: str | None = None) -> BuildPage:
    kind = of_scope(_CURSOR_KIND, sku)
    after = decode_ordered(cursor, kind)
    builds = _newest_first(counters, sku, None) if after is None else _newest_first(counters, sku, *after)
    listed = list(itertools.islice(builds, limit + 1))
    page, more = page_of(listed, limit, kind, lambda last: ordered_position(last.first_seen, last.build))
    return {"builds": [_build(b) for b in page], "nextCursor": more}


def _build(seen: BuildSeen) -> ReleaseBuild:
    return {"build": seen.build, "firstSeen": to_rfc3339(seen.first_seen), "lastSeen": to_rfc3339(seen.last_seen)}


def _share(part: int, whole: int) -> float | None:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else None


def _free(bad: int, whole: int) -> float | None:
    share = _share(bad, whole)
    return None if share is None else 1.0 - share


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def release_health(index: CrashIndex, counters: SessionCounters, sku: str, build: str, *,
                   from_ms: int | None = None, to_ms: int | None = None, interval: Interval = "day") -> ReleaseHealth:
    step = _STEP[interval]
    # by default the last week's whole buckets
    from_ms, to_ms = time_range(from_ms, to_ms, lambda to: last_buckets(to, step, _DEFAULT_DAYS * DAY_MS))
    start = floor_to(from_ms, step)
    if to_ms - from_ms > MAX_WINDOW_DAYS * DAY_MS:  # as asked for: its buckets may begin before it
        raise InvalidField(f"a window of at most {MAX_WINDOW_DAYS} days", "from")
    seen = counters.build(sku, build)
    if seen is None:
        raise NotFound(f"no session of build {build!r} of {sku!r} within retention")
    end = counted_to(to_ms)
    all_sessions = counters.session_counts(sku, start, end, step)
    sessions, crashes = _counts(index, counters, sku, build, start=start, end=end, step=step)
    series: list[ReleasePoint] = []
    for bucket in range(start, to_ms, step):
        s = sum(sessions.get(bucket, {}).values())
        crashed, c = sessions.get(bucket, {}).get("crashed", 0), crashes.get(bucket, 0)
        series.append({"start": to_rfc3339(bucket), "sessions": s, "crashedSessions": crashed,
                       "adoption": _share(s, all_sessions.get(bucket, 0)), "crashFreeSessions": _free(crashed, s),
                       "crashes": c, "crashRate": c / s if s else None})
    everyone = sum(all_sessions.values())
    figures = _figures(counters, sku, seen, (sessions, crashes), start=start, end=end, all_sessions=everyone)
    before = previous_build(counters, sku, seen.build, seen.first_seen)
    previous: ReleaseFigures | None = None
    change: ReleaseChange | None = None
    if before is not None:
        counts = _counts(index, counters, sku, before.build, start=start, end=end, step=end - start)
        previous = _figures(counters, sku, before, counts, start=start, end=end, all_sessions=everyone)
        change = {"adoption": _less(figures["adoption"], previous["adoption"]),
                  "crashFreeSessions": _less(figures["crashFreeSessions"], previous["crashFreeSessions"]),
                  "crashFreePlayers": _less(figures["crashFreePlayers"], previous["crashFreePlayers"]),
                  "crashRate": _less(figures["crashRate"], previous["crashRate"])}
    return {"sku": sku, **figures, "start": to_rfc3339(start), "end": to_rfc3339(to_ms), "interval": interval,
            "previous": previous, "change": change, "series": series}


# a build's sessions by bucket and outcome, and its crashes by bucket
BuildCounts = tuple[dict[int, dict[Outcome, int]], dict[int, int]]


def _counts(index: CrashIndex, counters: SessionCounters, sku: str, build: str, *, start: int, end: int,
            step: int) -> BuildCounts:
    """A build's sessions by outcome and its crashes over [start, end), by buckets of `step`."""
    return (counters.release_sessions(sku, build, start, end, step),
            index.crash_counts(sku, start, end, step, {"build_version": build}))


def _figures(counters: SessionCounters, sku: str, seen: BuildSeen, counts: BuildCounts, *, start: int, end: int,
             all_sessions: int) -> ReleaseFigures:
    """A build's figures over [start, end), from its counts there (by any buckets)."""
    sessions, crashes = counts
    by_outcome = {o: sum(b.get(o, 0) for b in sessions.values()) for o in OUTCOMES}
    outcomes: SessionOutcomes = {"ok": by_outcome["ok"], "crashed": by_outcome["crashed"],
                          "abnormal": by_outcome["abnormal"], "errored": by_outcome["errored"]}
    total = sum(by_outcome.values())
    # players by UTC day: every day the window touches
    days = (floor_to(start, DAY_MS), floor_to(end - 1, DAY_MS) + DAY_MS)
    players = counters.players(sku, seen.build, *days, crashed=False)
    crashed_players = min(players, counters.players(sku, seen.build, *days, crashed=True))
    c = sum(crashes.values())
    return {**_build(seen), "sessions": total, "outcomes": outcomes, "adoption": _share(total, all_sessions),
            "crashFreeSessions": _free(outcomes["crashed"], total), "players": players,
            "crashedPlayers": crashed_players, "crashFreePlayers": _free(crashed_players, players),
            "crashes": c, "crashRate": c / total if total else None}
