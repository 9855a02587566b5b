"""Bans: a player taken out of every board, every season, and put back.

The ban list is one row a player, written at once: from then on every board's worker keeps the
player's records hidden, whatever updates it applies (a hidden record still takes them, so a
restored player gets back the record it would have had). The records the player already has are
hidden by their boards' workers: a ban asks each board, on its partition of the `scores` topic, to
recheck the player's records there, in order with the board's updates; so they leave every rank
and list within the workers' delay, all boards alike, and come back the same way when the ban is
lifted. A record the player makes in the same instant as a ban, on a board it had none on, may
stay shown until its next update. In the same instant as a lifting, the worker's write holds the
ban rows of the players it writes hidden, and finds a lifting that came first: its batch is tried
again (ports.errors.BansLifted), while a lifting that comes after waits for it and then finds its
record to recheck."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from pipeline.idempotency import new_event_id
from pipeline.topics import SCORES, publish
from ports import EventLog, OutgoingRecord, RankingStore, SpillStore
from ports.cursors import Kind, decode_cursor, page_of
from ports.errors import InvalidField, NotFound
from ports.timeutil import Time, now_ms, to_rfc3339
from ranking.model import PlayerId, Recheck, ScoreEnvelope

# the records a log record asks to recheck: well under a record's size at 128-character ids
RECHECKS_PER_RECORD = 500
MAX_BANS = 1000
_CURSOR = Kind.BANS
_PLAYER = TypeAdapter(PlayerId)


@with_config(ConfigDict(extra="forbid"))
class BannedPlayer(TypedDict):
    playerId: str
    bannedAt: Time


@with_config(ConfigDict(extra="forbid"))
class BanChange(TypedDict):
    """A ban or its lifting, durable: the player's records are rechecked by their boards' workers."""

    playerId: str
    banned: bool
    records: Annotated[int, Field(ge=0, description="the player's records, on every board and season, rechecked")]


@with_config(ConfigDict(extra="forbid"))
class BanPage(TypedDict):
    bans: list[BannedPlayer]
    nextCursor: str | None


def _player(player_id: str) -> str:
    try:
        return _PLAYER.validate_python(player_id)
    except ValidationError as error:
        raise InvalidField(f"playerId {error.errors()[0]['msg']}", "playerId") from None


def ban(store: RankingStore, log: EventLog, spill: SpillStore, player_id: str) -> BanChange:
    """Bans the player (again: the first time stays when it was banned)."""
    player = _player(player_id)
    store.ban(player, now_ms())
    return {"playerId": player, "banned": True, "records": _recheck(store, log, spill, player)}


def restore(store: RankingStore, log: EventLog, spill: SpillStore, player_id: str) -> BanChange:
    """Lifts the player's ban. Its records are rechecked even when it was not banned: a lifting
    cut off after the ban list's write and sent again must still show them."""
    player = _player(player_id)
    store.unban(player)
    return {"playerId": player, "banned": False, "records": _recheck(store, log, spill, player)}


def banned_player(store: RankingStore, player_id: str) -> BannedPlayer:
    player = _player(player_id)
    at = store.banned([player]).get(player)
    if at is None:
        raise NotFound(f"player {player} is not banned")
    return {"playerId": player, "bannedAt": to_rfc3339(at)}


def bans(store: RankingStore, *, limit: int = 100, cursor: str | None = None) -> BanPage:
    """The ban list, by playerId."""
    page, after = page_of(store.bans(decode_cursor(cursor, _CURSOR) or "", limit + 1), limit, _CURSOR,
                          lambda last: last[0])
    return {"bans": [{"playerId": player, "bannedAt": to_rfc3339(at)} for player, at in page], "nextCursor": after}


def _recheck(store: RankingStore, log: EventLog, spill: SpillStore, player: str) -> int:
    """Asks each board the player has records on to show or hide them as the ban list now says."""
    records, count = rechecks(store, player)
    if records:
        publish(log, spill, SCORES, records)
    return count


def rechecks(store: RankingStore, player: str) -> tuple[list[OutgoingRecord], int]:
    """The `scores` records that recheck the player's records, one or more a board, and how many
    records they name."""
    keys = store.keys_of(player)
    by_board: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        by_board[key.partition("@")[0]].append(key)
    received = now_ms()
    return [
        OutgoingRecord(value=ScoreEnvelope(
            eventId=new_event_id("recheck", None), receivedAt=received, scores=[],
            rechecked=[Recheck(key=key, playerId=player) for key in stored[start : start + RECHECKS_PER_RECORD]],
        ).model_dump_json(exclude_none=True).encode(), key=board.encode())
        for board, stored in by_board.items() for start in range(0, len(stored), RECHECKS_PER_RECORD)
    ], len(keys)
