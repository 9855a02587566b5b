"""Leaderboard reads: settings, a player's rank, top-N, around a player, the rank of a score.
Ranks come from the tree (one rank query, one leaf-count query per list), lists from the score
index, so every answer costs O(log range + entries), whatever the number of players."""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Annotated, Any, Concatenate, NamedTuple, NotRequired, ParamSpec, TypeVar

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ports import BoardSettings as Stored  # BoardSettings here is the answer
from ports import Entry, NodeRange, Operator, Order, Position, RankingStore, Ties
from ports.cursors import Kind, decode_cursor, encode_cursor, of_scope
from ports.errors import InvalidField, NotFound, Unavailable
from ports.limits import INT64_MAX, INT64_MIN, Int64Answer, ascii_int, carried_bytes, within_bytes
from ports.timeutil import Time, now_ms, parse_epoch_ms, to_rfc3339
from ranking.model import BoardSettingsBody
from ranking.queries import ahead_among_ties, rank_of, rank_of_entry, rank_of_score, ranks_of_scores, score_at
from ranking.seasons import FIRST_SEASON, NEVER, next_season, same_schedule, season_key, season_start, started
from ranking.ties import best_tiebreak
from ranking.tree import Tree

MAX_TOP = 1000
MAX_RADIUS = 100
# how many players of one score a page at an offset may pass over: the database reads each one it
# passes (1 µs each on MariaDB, 0.5 s 500,000 into a tie), and where its players share a tiebreak too
# (a subscore board without subscores) as many again to rank the page's first; further in, pages
# follow each other by cursor
MAX_TIE_SKIP = 10_000
MAX_BOARDS = 1000
_CURSOR_KIND = Kind.BOARDS
_SEASONS_CURSOR = Kind.SEASONS
# season, score, tiebreak and playerId of the last entry, after a kind of the board's order and a
# digest of its name: a cursor of another board, or of its other order, would name a position
# that means nothing there
_ENTRIES_CURSOR = {"desc": Kind.ENTRIES_DESC, "asc": Kind.ENTRIES_ASC}
# a season a request starts (a wipe, a change of schedule) starts this long after it: the worker
# reads a board's settings once a batch, and a batch read before the change is written must hold no
# update received after the season's start
EPOCH_DELAY_MS = 1000
# how often a change of a board's settings (a PUT, a wipe) reads them again when another change
# landed between its read and its write (API workers at once): that one is never undone. Between
# tries a random wait of up to CHANGE_BACKOFF_S times the tries so far, so that those at once part
CHANGE_TRIES = 16
CHANGE_BACKOFF_S = 0.005


def _changes() -> Iterator[int]:
    """The tries of a change of a board's settings, with the wait before each after the first."""
    for attempt in range(CHANGE_TRIES):
        if attempt:
            time.sleep(random.uniform(0, CHANGE_BACKOFF_S * attempt))
        yield attempt

Rank = Annotated[int, Field(ge=1)]


@with_config(ConfigDict(extra="forbid"))
class BoardSettings(TypedDict):
    board: str
    order: Order
    operator: Operator
    reset: Annotated[str, Field(description="never, daily, weekly, monthly or a cron expression in UTC")]
    ties: Ties
    keepSeasons: Annotated[int | None, Field(description="past seasons retention keeps; null: all")]
    startsAt: Annotated[Time | None, Field(description="the board takes scores received from then on; null: always")]
    endsAt: Annotated[Time | None, Field(description="the board takes no score received from then on; null: never")]
    maxAttempts: Annotated[int | None, Field(ge=1, description="a tournament's attempts a player and season")]
    maxPlayers: Annotated[int | None, Field(ge=1, description="a tournament's players a season")]


@with_config(ConfigDict(extra="forbid"))
class Board(BoardSettings):
    """Settings, and the season asked for (the current one by default) with its player count."""

    players: Annotated[int, Field(ge=0)]
    season: Annotated[Time | None, Field(description=(
        "the season's start; null for a board that never resets nor was wiped"))]
    nextReset: Annotated[Time | None, Field(description=(
        "when the current season ends: its next reset, a season a wipe or a change of schedule starts "
        "(a moment after the request), or endsAt, whichever comes first; null: never"))]


@with_config(ConfigDict(extra="forbid"))
class Wiped(TypedDict):
    board: str
    season: Annotated[Time, Field(description="the new, empty season's start")]


@with_config(ConfigDict(extra="forbid"))
class Seasons(TypedDict):
    """A board's seasons that hold scores, newest first."""

    seasons: list[Time]
    nextCursor: str | None


@with_config(ConfigDict(extra="forbid"))
class BoardPage(TypedDict):
    boards: list[BoardSettings]
    nextCursor: str | None


@with_config(ConfigDict(extra="forbid"))
class RankedEntry(TypedDict):
    """A player's score and exact rank, alone (GET .../players/{playerId}) or in a list, with the
    metadata the record's update carried, and on a subscore board its subscore."""

    rank: Rank
    playerId: str
    score: Int64Answer
    subscore: NotRequired[Annotated[Int64Answer, Field(description="on a board whose ties are subscore only")]]
    metadata: dict[str, Any] | None


@with_config(ConfigDict(extra="forbid"))
class Entries(TypedDict):
    """Best first; players of one score share a rank, listed by playerId, unless the board's ties
    rank them (`ties`); `nextCursor` goes on below the last entry and `prevCursor` above the first
    (GET .../top?cursor=), each null where the board ends that way."""

    entries: list[RankedEntry]
    nextCursor: str | None
    prevCursor: str | None


@with_config(ConfigDict(extra="forbid"))
class ScoreRank(TypedDict):
    """The rank that score would have."""

    score: Int64Answer
    rank: Rank


P = ParamSpec("P")
R = TypeVar("R")


def _one_state(read: Callable[Concatenate[RankingStore, P], R]) -> Callable[Concatenate[RankingStore, P], R]:
    """A read whose queries all see one state of the store: the worker writes meanwhile, and a
    list's ranks read after its entries once found a score's last player gone (a KeyError, a 500)."""

    @functools.wraps(read)
    def in_snapshot(store: RankingStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with store.snapshot():
            return read(store, *args, **kwargs)

    return in_snapshot


def settings_of(store: RankingStore, board: str) -> Stored:
    settings = store.get_board(board)
    if settings is None:
        raise NotFound(f"no leaderboard {board}")
    return settings


def _season(settings: Stored, season: int | None) -> tuple[str, int | None]:
    """Where the season asked for (by its start; None: the current one) is stored, and its start."""
    if season is None:
        start = season_start(settings.reset, now_ms(), settings.epochs)
    elif settings.reset == NEVER and not settings.epochs and season != FIRST_SEASON:
        raise NotFound(f"leaderboard {settings.board} never reset nor was wiped: it has one season, "
                       f"from {to_rfc3339(FIRST_SEASON)}", "season")
    else:
        start = season
    return season_key(settings.board, start), start


def _time(at: int | None) -> str | None:
    return None if at is None else to_rfc3339(at)


def _settings(settings: Stored) -> BoardSettings:
    return {"board": settings.board, "order": settings.order, "operator": settings.operator, "reset": settings.reset,
            "ties": settings.ties, "keepSeasons": settings.keep_seasons, "startsAt": _time(settings.starts_at),
            "endsAt": _time(settings.ends_at), "maxAttempts": settings.max_attempts,
            "maxPlayers": settings.max_players}


@_one_state
def describe(store: RankingStore, tree: Tree, board: str, season: int | None = None) -> Board:
    settings = settings_of(store, board)
    key, start = _season(settings, season)
    now = now_ms()
    upcoming = next_season(settings.reset, now, settings.epochs or ())
    if settings.ends_at is not None and now < settings.ends_at and (upcoming is None or settings.ends_at < upcoming):
        upcoming = settings.ends_at
    return {**_settings(settings), "players": store.sum_counts(key, [[tree.top_range()]])[0],
            "season": _time(start), "nextReset": _time(upcoming)}


def seasons(store: RankingStore, board: str, *, limit: int = 100, cursor: str | None = None) -> Seasons:
    settings_of(store, board)
    kind = of_scope(_SEASONS_CURSOR, board)
    position = decode_cursor(cursor, kind)
    before = None if position is None else ascii_int(position, 0, INT64_MAX)
    if position is not None and before is None:
        raise InvalidField("cursor is not one this listing gave out", "cursor")
    found = store.seasons(board, before, limit + 1)
    page = found[:limit]
    return {"seasons": [to_rfc3339(start) for start in page],
            "nextCursor": encode_cursor(kind, str(page[-1])) if len(found) > limit else None}


def boards(store: RankingStore, *, limit: int = 100, cursor: str | None = None) -> BoardPage:
    """The boards by name, with their settings."""
    found = store.boards(decode_cursor(cursor, _CURSOR_KIND) or "", limit + 1)
    page = found[:limit]
    return {
        "boards": [_settings(b) for b in page],
        "nextCursor": encode_cursor(_CURSOR_KIND, page[-1].board) if len(found) > limit else None,
    }


def configure(store: RankingStore, board: str, body: BoardSettingsBody) -> tuple[bool, BoardSettings]:
    """Whether the board was made, and its settings. `board` is a name the route took
    (ranking.model.NAME_PATTERN). A PUT sets the settings it names; those left out stay as they
    are (a new board takes the defaults), also when another change lands at once (CHANGE_TRIES)."""
    for _ in _changes():
        known = store.get_board(board)
        if known is None:
            made = _window(Stored(board, **{field: _value(body, name) for name, field in _FIELDS.items()}), None)
            # only if still missing: the board's first scores may make it meanwhile, as shared
            if store.add_board(made):
                return True, _settings(made)
            continue
        settings = _put(known, body)
        if store.replace_board(known, settings):
            return False, _settings(settings)
    raise _changing(board)


def _put(known: Stored, body: BoardSettingsBody) -> Stored:
    """The settings a PUT makes of those stored. A new schedule starts a season a moment after
    now (EPOCH_DELAY_MS) and applies from then on; the seasons before keep the schedule they had.
    Ties are chosen when the board is made (its records' tiebreaks and tie trees are of that mode),
    and an earliest board keeps its order (its tiebreaks are receipt times signed by it), as does a
    board with seasons (a schedule, or one once, or a wipe) or a closed window. A
    window's end comes after its start, whichever end the PUT names (ranking.tournaments for the
    limits)."""
    board, named = known.board, body.model_fields_set
    settings = _window(replace(known, **{field: _value(body, name) for name, field in _FIELDS.items()
                                         if name in named}), known)
    if settings.ties != known.ties:
        raise InvalidField(f"leaderboard {board} ranks ties {known.ties}: that cannot change (make a new board)",
                           "ties")
    if known.ties == "earliest" and settings.order != known.order:
        raise InvalidField(f"leaderboard {board} ranks ties earliest first: its order cannot change", "order")
    # its seasons are read in the board's order: another would re-rank those that ended (and a closed
    # window's one season ended)
    closed = known.ends_at is not None and known.ends_at <= now_ms()
    if settings.order != known.order and (known.reset != NEVER or known.epochs or closed):
        raise InvalidField(f"leaderboard {board} has seasons, or a window closed, each read as it ended: its "
                           "order cannot change (make a new board)", "order")
    # its last season ended then, and that end is told once (ranking.season_ends): no other end
    if known.ends_at is not None and known.ends_at <= now_ms() and settings.ends_at != known.ends_at:
        raise InvalidField(f"leaderboard {board}'s window closed at {to_rfc3339(known.ends_at)}: it is not "
                           "opened again nor its end moved (make a new board)", "endsAt")
    # from a moment after now on, or from a wipe's season still to begin (so that it begins under
    # the new schedule): the seasons before keep the schedule they had
    if not same_schedule(settings.reset, known.reset):
        now = now_ms()
        at = min((start for start, _ in known.epochs or () if start > now), default=now + EPOCH_DELAY_MS)
        settings = replace(settings, epochs=started(known, at, settings.reset))
    return settings


def _changing(board: str) -> Unavailable:
    return Unavailable(f"leaderboard {board}'s settings changed {CHANGE_TRIES} times while this request changed "
                       "them; try again")


# the settings a PUT names, by their names in the body and in the store
_FIELDS = {"order": "order", "operator": "operator", "reset": "reset", "ties": "ties", "keepSeasons": "keep_seasons",
           "startsAt": "starts_at", "endsAt": "ends_at", "maxAttempts": "max_attempts", "maxPlayers": "max_players"}
_TIMES = frozenset({"startsAt", "endsAt"})


def _value(body: BoardSettingsBody, name: str) -> Any:
    """A setting as stored: times in epoch ms."""
    value = getattr(body, name)
    return parse_epoch_ms(value) if name in _TIMES and value is not None else value


# how long ago an endsAt a PUT sets may be (a clock behind, a board closed as of now): an end further
# back is never told (ranking.season_ends looks at an end for LOOKING_MS after its wait)
PAST_END_MOST_MS = 30 * 60_000


def _window(settings: Stored, known: Stored | None) -> Stored:
    """The settings, if their window is one: it ends after it starts (also when a PUT names one end),
    and an end the PUT sets (not the one `known` has) is not long past."""
    if settings.starts_at is not None and settings.ends_at is not None and settings.ends_at <= settings.starts_at:
        raise InvalidField(f"leaderboard {settings.board}'s endsAt must be after its startsAt", "endsAt")
    ends = settings.ends_at
    if ends is not None and (known is None or ends != known.ends_at) and ends < now_ms() - PAST_END_MOST_MS:
        raise InvalidField(f"leaderboard {settings.board}'s endsAt is {to_rfc3339(ends)}, more than "
                           f"{PAST_END_MOST_MS // 60_000} minutes ago: a season's end is told with its final top, "
                           "and one that far back no more (give a time to come, or now to close it now)", "endsAt")
    return settings


def wipe(store: RankingStore, board: str) -> Wiped:
    """Starts a new, empty season of the board, whatever its schedule: O(1), as a reset is. What
    it held stays readable as the season before, and an update received before the wipe still lands
    there, whenever the worker applies it. It takes effect EPOCH_DELAY_MS after the request."""
    for _ in _changes():
        settings = settings_of(store, board)
        at = now_ms() + EPOCH_DELAY_MS
        if store.replace_board(settings, replace(settings, epochs=started(settings, at, settings.reset))):
            return {"board": board, "season": to_rfc3339(at)}
    raise _changing(board)


def _shown(store: RankingStore, key: str, player_ids: Sequence[str]) -> dict[str, Entry]:
    """These players' records, but for those hidden by a ban (ranking.bans)."""
    return {player: e for player, e in store.records(key, player_ids).items() if not e.hidden}


def _entry(rank: int, entry: Entry, settings: Stored) -> RankedEntry:
    answer: RankedEntry = {"rank": rank, "playerId": entry.player_id, "score": entry.score,
                           "metadata": None if entry.metadata is None else json.loads(entry.metadata)}
    if settings.ties == "subscore":  # an earliest board's tiebreak is a receipt time, not shown
        answer["subscore"] = entry.tiebreak
    return answer


def _ranked(
    store: RankingStore, tree: Tree, settings: Stored, board: str, entries: Sequence[Entry]
) -> list[RankedEntry]:
    """Ranks for a contiguous run of the board (stored under `board`): the first from the tree,
    the rest one apart where ties do not share a rank, else by adding the leaf counts of the
    scores passed (1, 2, 2, 4)."""
    if not entries:
        return []
    if settings.ties != "shared":
        first = rank_of_entry(tree, store, board, settings, entries[0])
        return [_entry(first + i, entry, settings) for i, entry in enumerate(entries)]
    rank = rank_of(tree, store, board, settings.order, entries[0].score)
    scores = [e.score for e in entries]
    counts = store.node_counts(board, NodeRange(0, min(scores), max(scores)))
    ranked: list[RankedEntry] = []
    previous = entries[0].score
    for entry in entries:
        if entry.score != previous:
            rank += counts[previous]
            previous = entry.score
        ranked.append(_entry(rank, entry, settings))
    return ranked


@_one_state
def player(store: RankingStore, tree: Tree, board: str, player_id: str, season: int | None = None) -> RankedEntry:
    settings = settings_of(store, board)
    key, _ = _season(settings, season)
    record = _shown(store, key, [player_id]).get(player_id)
    if record is None:
        raise NotFound(f"player {player_id} has no score on {board}")
    return _entry(rank_of_entry(tree, store, key, settings, record), record, settings)


def entries_kind(settings: Stored) -> str:
    """The kind of the board's entries cursors (ports.cursors)."""
    return of_scope(_ENTRIES_CURSOR[settings.order], settings.board)


# a cursor's position starts with these: where it pages above its entry (prevCursor), and then
# where its page takes that entry too (one given by a page a cursor led past what went meanwhile)
_ABOVE, _FROM = "^", "="


class _Cursor(NamedTuple):
    season: int
    position: Position
    above: bool
    inclusive: bool


def _at(cursor: str | None, settings: Stored) -> _Cursor | None:
    """Where a cursor of the board's entries goes on from."""
    position = decode_cursor(cursor, entries_kind(settings))
    if position is None:
        return None
    above = position.startswith(_ABOVE)
    inclusive = position.removeprefix(_ABOVE).startswith(_FROM)
    season, score, tiebreak, player = [*position[above + inclusive:].split(":", 3), "", "", ""][:4]
    # none: the board's first season (its start is None), not whichever is current when it is read
    at_season = ascii_int(season, 0, INT64_MAX) if season else FIRST_SEASON
    at_score, at_tiebreak = ascii_int(score, INT64_MIN, INT64_MAX), ascii_int(tiebreak, INT64_MIN, INT64_MAX)
    if at_season is None or at_score is None or at_tiebreak is None or not player:
        raise InvalidField("cursor is not one this listing gave out", "cursor")
    return _Cursor(at_season, Position(at_score, at_tiebreak, player), above, inclusive)


def _page(ranked: list[RankedEntry], *, above: Position | None, below: Position | None, settings: Stored,
          season: int | None, inclusive: bool = False) -> Entries:
    """The page's entries, with a cursor to those above `above` and one to those below `below`
    (None: the board ends there that way), each taking the entry at it too where `inclusive`."""

    def cursor(position: Position, upward: bool) -> str:
        return encode_cursor(entries_kind(settings), f"{_ABOVE if upward else ''}{_FROM if inclusive else ''}"
                                                     f"{'' if season is None else season}:"
                                                     f"{position.score}:{position.tiebreak}:{position.player_id}")

    return {"entries": ranked, "nextCursor": None if below is None else cursor(below, False),
            "prevCursor": None if above is None else cursor(above, True)}


def _beyond(store: RankingStore, key: str, settings: Stored, position: Position, *, worse: bool) -> Position | None:
    """The position, where the board holds an entry worse (or better) than it; else None."""
    return position if store.following(key, settings.order, position, worse=worse, limit=1) else None


def _following(store: RankingStore, key: str, settings: Stored, at: Position, *, worse: bool, limit: int,
               skip: int = 0, inclusive: bool = False) -> list[Entry]:
    """Up to `limit` entries worse (or better) than `at`, nearest first, after `skip` of them; the
    entry at `at` first where `inclusive` and the board still holds it there."""
    found = _shown(store, key, [at.player_id]).get(at.player_id) if inclusive else None
    there = [found] if found is not None and found.position == at else []
    return there + store.following(key, settings.order, at, worse=worse, limit=limit - len(there), skip=skip)


def _led_past(store: RankingStore, key: str, settings: Stored, at: Position, *, worse: bool,
              season: int | None) -> Entries:
    """The empty page a cursor at `at` led to, what was beyond it gone meanwhile: its one cursor
    leads back the other way, the entry at `at` included, where the board goes on."""
    held = _shown(store, key, [at.player_id]).get(at.player_id)
    there = held is not None and held.position == at
    back = at if there else _beyond(store, key, settings, at, worse=not worse)
    return _page([], above=back if worse else None, below=None if worse else back, settings=settings, season=season,
                 inclusive=there)


@_one_state
def top(store: RankingStore, tree: Tree, board: str, *, limit: int = 10, offset: int | None = None,
        season: int | None = None, cursor: str | None = None) -> Entries:
    """The best `limit` entries from `offset`, or after a cursor's entry: keyset paging, which
    neither skips nor repeats a player whose score did not change while pages are read."""
    settings = settings_of(store, board)
    if cursor is not None and offset is not None:
        raise InvalidField("give cursor or offset, not both", "offset")
    offset = offset or 0
    key, start = _season(settings, season)
    at = _at(cursor, settings)
    if at is not None:
        # the cursor's season, also after a reset since its first page; one asked for must be it
        at_key, at_start = _season(settings, at.season)
        if season is not None and at_key != key:
            raise InvalidField("the cursor is of another season", "season")
        if at.above:
            return _above(store, tree, settings, at_key, at, limit=limit, season=at_start)
        return _below(store, tree, settings, at_key, at.position, limit=limit, season=at_start,
                      inclusive=at.inclusive, cursor=True)
    first = score_at(tree, store, key, settings.order, offset + 1)
    if first is None:
        return _page([], above=None, below=None, settings=settings, season=start)
    # before every player of that score, of whom `skip` are above the offset
    skip = offset - (rank_of(tree, store, key, settings.order, first) - 1)
    if skip > MAX_TIE_SKIP:
        raise InvalidField(f"offset {offset:,} is {skip:,} players into those of score {first}, where an offset "
                           f"may go {MAX_TIE_SKIP:,} players into a score at most (here offset "
                           f"{offset - skip + MAX_TIE_SKIP:,}): from there on, follow each page's nextCursor",
                           "offset")
    return _below(store, tree, settings, key, Position(first, best_tiebreak(settings.order), ""), limit=limit,
                  season=start, skip=skip, cursor=False, offset=offset)


def _below(store: RankingStore, tree: Tree, settings: Stored, key: str, after: Position, *, limit: int,
           season: int | None, cursor: bool, inclusive: bool = False, skip: int = 0, offset: int = 0) -> Entries:
    """The `limit` entries below `after` (a cursor's, or the offset's score), after `skip` of them."""
    entries = _following(store, key, settings, after, worse=True, limit=limit + 1, skip=skip, inclusive=inclusive)
    ranked = _ranked(store, tree, settings, key, entries)
    # as many as Lambda can carry: 1,000 entries of metadata made of " and \ would be 6.4 MB there
    fits = within_bytes(carried_bytes(json.dumps(entry)) for entry in ranked[:limit])
    page = entries[:fits]
    if not page:  # a cursor's, what was beyond it gone (an offset's score, found in the tree, holds players)
        return _led_past(store, key, settings, after, worse=True, season=season) if cursor else \
            _page([], above=None, below=None, settings=settings, season=season)
    # an offset's page has entries above it where it skipped some; a cursor's, where the board
    # still holds one better than its first
    above = _beyond(store, key, settings, page[0].position, worse=False) if cursor else \
        page[0].position if offset else None
    return _page(ranked[:fits], above=above, below=page[-1].position if len(entries) > fits else None,
                 settings=settings, season=season)


def _above(store: RankingStore, tree: Tree, settings: Stored, key: str, at: _Cursor, *, limit: int,
           season: int | None) -> Entries:
    """The `limit` entries above a cursor's position, best first: of those that do not all fit in an
    answer, the nearest it."""
    nearest = _following(store, key, settings, at.position, worse=False, limit=limit + 1, inclusive=at.inclusive)
    entries = nearest[:limit][::-1]
    ranked = _ranked(store, tree, settings, key, entries)
    fits = within_bytes(carried_bytes(json.dumps(entry)) for entry in reversed(ranked))
    page = entries[len(entries) - fits:]
    if not page:
        return _led_past(store, key, settings, at.position, worse=False, season=season)
    return _page(ranked[len(ranked) - fits:], above=page[0].position if len(nearest) > fits else None,
                 below=_beyond(store, key, settings, page[-1].position, worse=True), settings=settings, season=season)


@_one_state
def around(store: RankingStore, tree: Tree, board: str, player_id: str, *, radius: int = 5,
           season: int | None = None) -> Entries:
    settings = settings_of(store, board)
    key, start = _season(settings, season)
    record = _shown(store, key, [player_id]).get(player_id)
    if record is None:
        raise NotFound(f"player {player_id} has no score on {board}")
    # one more each side than shown: whether the board goes on there
    above = store.following(key, settings.order, record.position, worse=False, limit=radius + 1)
    below = store.following(key, settings.order, record.position, worse=True, limit=radius + 1)
    entries = [*reversed(above[:radius]), record, *below[:radius]]
    return _page(_ranked(store, tree, settings, key, entries),
                 above=entries[0].position if len(above) > radius else None,
                 below=entries[-1].position if len(below) > radius else None, settings=settings, season=start)


@with_config(ConfigDict(extra="forbid"))
class PlayerRanks(TypedDict):
    """The players asked for with a record, best first (in the board's order, as a list), and
    those without one."""

    entries: list[RankedEntry]
    missing: list[str]


@_one_state
def ranks_of(store: RankingStore, tree: Tree, board: str, player_ids: Sequence[str],
             season: int | None = None) -> PlayerRanks:
    """Each player's record and global rank (a friends list): the ranks of its distinct scores, and
    where ties do not share a rank, the scores' players and the ties ahead of each player whose score
    others have too, each of them many a round trip (statements.one_row_each)."""
    settings = settings_of(store, board)
    key, _ = _season(settings, season)
    found = _shown(store, key, list(dict.fromkeys(player_ids)))
    sign = -1 if settings.order == "desc" else 1
    ordered = sorted(found.values(), key=lambda e: (sign * e.score, sign * e.tiebreak, e.player_id))
    scores = list({e.score: None for e in ordered})
    ranks = dict(zip(scores, ranks_of_scores(tree, store, key, settings.order, scores), strict=True))
    players = {} if settings.ties == "shared" else store.leaves(key, scores)
    tied = [entry for entry in ordered if players.get(entry.score, 0) > 1]
    ahead = dict(zip((e.player_id for e in tied), ahead_among_ties(store, key, settings, tied, players), strict=True))
    entries = [_entry(ranks[entry.score] + ahead.get(entry.player_id, 0), entry, settings) for entry in ordered]
    return {"entries": entries,
            "missing": [player for player in dict.fromkeys(player_ids) if player not in found]}


@_one_state
def rank_for_score(store: RankingStore, tree: Tree, board: str, score: int, season: int | None = None, *,
                   subscore: int | None = None) -> ScoreRank:
    settings = settings_of(store, board)
    key, _ = _season(settings, season)
    return {"score": score, "rank": rank_of_score(tree, store, key, settings, score, subscore=subscore)}
