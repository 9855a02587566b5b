"""Scores and board settings as the API takes them, and as carried on the `scores` topic."""

from __future__ import annotations

import json
from typing import Annotated, Any, NotRequired

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from ports import Operator, Order, Ties
from ports.limits import ASCII_INT, INT64_MAX, INT64_MIN, Identifier, Int64, PathSegment, Whole, name_pattern
from ports.timeutil import parse_epoch_ms
from ranking.seasons import NEVER, Schedule

MAX_BATCH = 500
NAME_PATTERN = name_pattern("A-Za-z0-9._:-", 128)
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
PlayerId = PathSegment


# a record's metadata: a flat object, bounded by its schema (a name, a loadout, a replay id; not a
# save game): at most 16 keys of 64 characters, each a string of 128, a number, true, false or null
MAX_METADATA_KEYS = 16
# and as answered (api.resolver's JSON: escaped, ", " and ": " between), what any metadata within those
# counts takes in printable ASCII but " and \: a friends list of 1,000 entries stays near 3.5 MB, and
# as Lambda carries it (ports.limits.carried_bytes) near 6.4 MB at most, which only " and \ reach
MAX_METADATA_BYTES = 3200


def _fractional(value: object) -> object:
    """An integer is an Int64 or nothing: past int64 it would be kept as a float it is not."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError("an integer in metadata is within int64")
    return value


def _one_of_them(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """One error that says what a value may be, not the first member's of the union ("a valid string")."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("metadata_value", "a metadata value is a string of up to 128 characters, an "
                                  "integer within int64, a finite number, true, false or null") from None


_MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=64)]
_MetadataText = Annotated[str, StringConstraints(max_length=128)]
# JSON has no infinity: a number too large for a float (1e400) is refused, not kept as null
_Finite = Annotated[float, Field(allow_inf_nan=False)]
MetadataValue = Annotated[_MetadataText | Int64 | Annotated[_Finite, BeforeValidator(_fractional)] | bool | None,
                          WrapValidator(_one_of_them)]


def _answerable(metadata: dict[str, Any]) -> dict[str, Any]:
    """Within MAX_METADATA_BYTES as answered, and sorted by key: a retry whose object lists them in
    another order is the same body (its hash)."""
    if len(json.dumps(metadata)) > MAX_METADATA_BYTES:
        raise PydanticCustomError("metadata_size", f"metadata is at most {MAX_METADATA_BYTES} bytes as answered, in "
                                  'JSON: " and \\ take 2 bytes there, another control character or one outside '
                                  "ASCII 6 (é), an emoji 12")
    return dict(sorted(metadata.items()))


Metadata = Annotated[dict[_MetadataKey, MetadataValue], Field(max_length=MAX_METADATA_KEYS),
                     AfterValidator(_answerable)]


def metadata_text(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))


# 0 is kept as absent, which means 0: a retry that leaves it out is the same body (its hash)
Subscore = Annotated[Int64 | None, AfterValidator(lambda found: found or None), Field(description=(
    "breaks ties on a board whose ties are `subscore`, sorted the way the board sorts (absent: 0); "
    "ignored on other boards"))]
CarriedMetadata = Annotated[Metadata | None, Field(description=(
    f"kept with the record: at most {MAX_METADATA_KEYS} keys, each a string of up to 128 characters, an "
    "integer within int64, a number with a fraction (a double), true, false or null, and at most "
    f"{MAX_METADATA_BYTES} bytes as answered (JSON, non-ASCII escaped); replaced by the next "
    "update that sets the score (for best, one at least as good), left by one that does not"))]


class Score(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    board: Name
    playerId: PlayerId
    score: Int64
    subscore: Subscore = None
    metadata: CarriedMetadata = None


class AttemptBody(BaseModel):
    """A score as an attempt at a tournament board (the board is the route's)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    playerId: PlayerId
    score: Int64
    subscore: Subscore = None
    metadata: CarriedMetadata = None

    def on(self, board: str) -> Score:
        return Score(board=board, playerId=self.playerId, score=self.score, subscore=self.subscore,
                     metadata=self.metadata)


class PlayerRef(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    board: Name
    playerId: PlayerId


class Recheck(BaseModel):
    """A record whose player was banned or restored (ranking.bans): the worker shows or hides it
    as the ban list says when it applies this."""

    model_config = ConfigDict(strict=True, extra="forbid")

    key: str
    """Where the record is stored: its board's season (ranking.seasons.season_key)."""
    playerId: PlayerId


class ScoreEnvelope(BaseModel):
    """One record per board of a request, keyed by board, so a board's updates stay in order in
    one partition and only that partition's worker writes the board. `removed`: records deleted
    (after the scores, in the season current at receivedAt); `rechecked`: records shown or hidden
    as the ban list says."""

    model_config = ConfigDict(strict=True)

    eventId: str
    receivedAt: int
    scores: list[Score]
    bodyHash: str | None = None
    removed: list[PlayerRef] = Field(default_factory=list)
    rechecked: list[Recheck] = Field(default_factory=list)
    attempt: bool | None = None
    """An attempt at a tournament board (ranking.tournaments): the only scores such a board takes."""


# a record of the `scores` topic as the worker reads it: capture checked every bound of the API's
# models (rule 10 of docs/architecture.md), so the worker checks types and what the stores index, in pydantic-core
# alone; the API models' Python validators, run again for every update, were most of its parsing
_Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
# Metadata's keys and values as it bounds them, without its Python validators: a number a JSON text
# cannot hold again (1e400 reads as infinity) is still refused, not stored as text no answer could carry
_RecordMetadata = Annotated[dict[_MetadataKey, _MetadataText | _Int64 | _Finite | bool | None],
                            Field(max_length=MAX_METADATA_KEYS)]


class _RecordConfig(TypedDict):
    __pydantic_config__ = ConfigDict(strict=True)  # type: ignore[misc]


class ScoreRecordScore(_RecordConfig):
    board: Name
    playerId: Identifier
    score: _Int64
    subscore: NotRequired[_Int64 | None]
    metadata: NotRequired[_RecordMetadata | None]


class ScoreRecordRef(_RecordConfig):
    board: Name
    playerId: Identifier


class ScoreRecordRecheck(_RecordConfig):
    key: str
    playerId: Identifier


class ScoreRecord(_RecordConfig):
    """A ScoreEnvelope as the worker reads it."""

    eventId: str
    receivedAt: int
    scores: list[ScoreRecordScore]
    bodyHash: NotRequired[str | None]
    removed: NotRequired[list[ScoreRecordRef]]
    rechecked: NotRequired[list[ScoreRecordRecheck]]
    attempt: NotRequired[bool | None]


SCORE_RECORD = TypeAdapter(ScoreRecord)

_SCORES = TypeAdapter(list[Score])


def scores_json(scores: list[Score]) -> bytes:
    """What a score record carries, as the text its body hash is taken of: fields left out are
    left out here too, so a field added to Score changes no hash taken before."""
    return _SCORES.dump_json(scores, exclude_none=True)


MAX_KEPT_SEASONS = 100_000
MAX_ATTEMPTS = 1_000_000
MAX_PLAYERS = 100_000_000


def _time(value: str) -> str:
    parse_epoch_ms(value)
    return value


# a time in a body, as the query parameters take it, in a string either way (the document says both
# forms); epoch ms in BoardSettings (leaderboard.configure)
BodyTime = Annotated[str, StringConstraints(max_length=64), AfterValidator(_time),
                     WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time", "maxLength": 64},
                                               {"type": "string", "pattern": f"^{ASCII_INT.pattern}$"}]})]


class BoardSettingsBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    order: Order = Field("desc", description=(
        "desc: higher scores rank first; asc: lower. A board whose ties are earliest keeps the order it was made "
        "with (its tiebreaks are receipt times signed by it)"))
    operator: Operator = Field("best", description=(
        "how an update combines with the player's score: best keeps the better, set replaces, incr adds, decr "
        "subtracts (incr and decr saturate at the int64 bounds)"))
    reset: Schedule = Field(NEVER, description=(
        "when a new season starts: never, daily (00:00 UTC), weekly (Mondays 00:00 UTC), monthly (the 1st, "
        "00:00 UTC), or a cron expression in UTC (`0 6 * * 5`: Fridays 06:00). A reset writes nothing: the new "
        "season starts empty and every past one stays queryable (`season=`)"))
    ties: Ties = Field("shared", description=(
        "how players of the same score rank: shared (one rank, listed by playerId), earliest (whoever reached "
        "the score first ranks higher) or subscore (each update's `subscore` breaks the tie); with the latter "
        "two every player has a rank of its own. Chosen when the board is made: it cannot change"))
    keepSeasons: Whole | None = Field(None, ge=0, le=MAX_KEPT_SEASONS, description=(
        "how many past seasons retention keeps, newest first (the current one is always kept): older ones are "
        "deleted by the daily purge; left out, every season is kept"))
    startsAt: BodyTime | None = Field(None, description=(
        "RFC 3339 or epoch ms: the board takes scores received from then on; null: from the start"))
    endsAt: BodyTime | None = Field(None, description=(
        "RFC 3339 or epoch ms, after startsAt: the board takes no score received from then on; null: never ends. "
        "An end set (not the board's already) is 30 minutes past at most"))
    maxAttempts: Whole | None = Field(None, ge=1, le=MAX_ATTEMPTS, description=(
        "a tournament: each player's attempts a season (POST .../attempts); null: unlimited"))
    maxPlayers: Whole | None = Field(None, ge=1, le=MAX_PLAYERS, description=(
        "a tournament: the players a season takes, first come; null: unlimited. A board with maxAttempts or "
        "maxPlayers takes scores only as attempts: a /v1/scores update to it is not applied"))


MAX_PLAYER_RANKS = 1000


class PlayerRanksBody(BaseModel):
    """The players whose ranks are asked for at once (a friends list)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    playerIds: list[PlayerId] = Field(min_length=1, max_length=MAX_PLAYER_RANKS)
