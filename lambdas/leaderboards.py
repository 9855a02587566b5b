"""Leaderboards: the boards, board settings, a player's rank, top-N, around a player, the rank of a
score. Each route's signature is its part of the contract: the query parameters it takes, typed
and bounded; any other is refused (api.resolver.declared_only)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.document import RETRY_AFTER
from api.params import DIGITS, Cursor, Season
from api.requests import JsonBody
from api.resolver import answer, create_resolver, error_answer, idempotency_key, json_response, posted
from ports import MAX_EPOCHS
from ports.limits import INT64_MAX, INT64_MIN, SEGMENT_PATTERN
from ports.telemetry import instrumented
from ranking import bans, leaderboard, tournaments
from ranking.capture import Removal, capture_removal
from ranking.leaderboard import (
    Board,
    BoardPage,
    BoardSettings,
    Entries,
    PlayerRanks,
    RankedEntry,
    ScoreRank,
    Seasons,
    Wiped,
)
from ranking.model import MAX_PLAYER_RANKS, NAME_PATTERN, AttemptBody, BoardSettingsBody, PlayerRanksBody
from ranking.seasons import REMEMBERED_MS
from ranking.tree import DEFAULT_TREE

app = create_resolver()
# a player's id as a path names it: what the domain takes (ranking.model.PlayerId), said in the document
PlayerIdParam = Annotated[str, Path(json_schema_extra={"pattern": SEGMENT_PATTERN})]
_ENTRIES = "ranked entries, best first; ties share a rank and are ordered by playerId unless the board ranks them"


@app.get("/v1/leaderboards", operation_id="listBoards", summary="The leaderboards by name, with their settings",
         responses={200: answer(BoardPage, "a page of boards")})
def list_boards(limit: Annotated[int, Query(ge=1, le=leaderboard.MAX_BOARDS), DIGITS] = 100,
                cursor: Cursor = None) -> Response[str]:
    return json_response(200, leaderboard.boards(current().ranking, limit=limit, cursor=cursor))


SETTINGS = JsonBody(BoardSettingsBody)
_TOO_MANY_SEASONS = error_answer(
    f"too_many_seasons: the board remembers the starts of its last {MAX_EPOCHS} seasons (its first, then each "
    f"wipe and change of schedule), each for {REMEMBERED_MS // 3_600_000} hours at least (to place late scores "
    "and tell the seasons' ends), and this would forget one younger",
    {"Retry-After": {"schema": RETRY_AFTER["schema"], "description": "when the oldest of them is forgotten: seconds "
                                                                     "to wait"}})


@app.put("/v1/leaderboards/<board>", operation_id="putBoard", description="needs a server key",
         openapi_extensions=SETTINGS.openapi,
         responses={200: answer(BoardSettings, "changed: its settings"), 201: answer(BoardSettings, "made"),
                    409: _TOO_MANY_SEASONS})
def put_board(board: Annotated[str, Path(pattern=NAME_PATTERN,
                                         description="1 to 128 of A-Z a-z 0-9 . _ : -, not . or ..")]) -> Response[str]:
    made, settings = leaderboard.configure(current().ranking, board, SETTINGS.one(posted(app.current_event)))
    return json_response(201 if made else 200, settings)


@app.get("/v1/leaderboards/<board>", operation_id="getBoard",
         responses={200: answer(Board, "settings, the season and its player count")})
def get_board(board: str, season: Season = None) -> Response[str]:
    return json_response(200, leaderboard.describe(current().ranking, DEFAULT_TREE, board, season))


@app.delete("/v1/leaderboards/<board>", operation_id="wipeBoard", summary="Wipe a board: a new, empty season now",
            description="needs a server key; as a reset: nothing is deleted (O(1)), and what the board held stays "
                        "readable as the season before (season=); the new season starts a second after the request",
            responses={200: answer(Wiped, "the new season"), 409: _TOO_MANY_SEASONS})
def wipe_board(board: str) -> Response[str]:
    return json_response(200, leaderboard.wipe(current().ranking, board))


@app.get("/v1/leaderboards/<board>/seasons", operation_id="listSeasons",
         summary="The seasons of a board that resets, newest first",
         responses={200: answer(Seasons, "the starts of the seasons that hold scores")})
def list_seasons(board: str, limit: Annotated[int, Query(ge=1, le=leaderboard.MAX_BOARDS), DIGITS] = 100,
                 cursor: Cursor = None) -> Response[str]:
    return json_response(200, leaderboard.seasons(current().ranking, board, limit=limit, cursor=cursor))


@app.get("/v1/leaderboards/<board>/players/<player_id>", operation_id="getPlayer",
         responses={200: answer(RankedEntry, "the player's score and exact rank (ties share a rank)")})
def get_player(board: str, player_id: PlayerIdParam, season: Season = None) -> Response[str]:
    return json_response(200, leaderboard.player(current().ranking, DEFAULT_TREE, board, player_id, season))


@app.delete("/v1/leaderboards/<board>/players/<player_id>", operation_id="deletePlayer",
            summary="Delete a player's record from the board's current season",
            description="needs a server key; applied by the board's worker in order with its updates (202 once "
                        "the request is durable): the record leaves every rank and list, and a later update "
                        "starts a new one",
            responses={202: answer(Removal, "the deletion is durable")})
def delete_player(board: str, player_id: PlayerIdParam) -> Response[str]:
    a = current()
    key = idempotency_key(app.current_event)  # a bad request is a 400 whatever the board
    return json_response(202, capture_removal(a.log, a.spill, leaderboard.settings_of(a.ranking, board), player_id,
                                              idempotency_key=key))


ATTEMPT = JsonBody(AttemptBody)
_CONFLICT = error_answer(
    "not_a_tournament (a board without maxAttempts nor maxPlayers), tournament_closed (outside startsAt..endsAt), "
    "attempts_exhausted (the player made maxAttempts this season), tournament_full (a new player once the season "
    "has maxPlayers), idempotency_conflict (the Idempotency-Key was used with another body)")


@app.post("/v1/leaderboards/<board>/attempts", operation_id="postAttempt",
          summary="An attempt at a tournament board: counted against its limits, then its score applied",
          description="needs a server key; one score as in /v1/scores, without its board. Counted at once (409 past "
                      "a limit), and 202 once the score is durable: the board's worker applies it within its delay. "
                      "An Idempotency-Key makes a retry the same attempt: the same answer, counted once",
          openapi_extensions=ATTEMPT.openapi,
          responses={202: answer(tournaments.AttemptReceipt, "the attempt is counted and its score durable"),
                     409: _CONFLICT})
def post_attempt(board: str) -> Response[str]:
    a = current()
    body = ATTEMPT.one(posted(app.current_event))
    return json_response(202, tournaments.attempt(a.ranking, a.log, a.spill, leaderboard.settings_of(a.ranking, board),
                                                  body, idempotency_key=idempotency_key(app.current_event)))


RANKS_OF = JsonBody(PlayerRanksBody)


@app.post("/v1/leaderboards/<board>/players:ranks", operation_id="getPlayerRanks",
          summary="Several players' records and exact ranks at once (a friends list)",
          description=f"up to {MAX_PLAYER_RANKS} playerIds; those without a record are listed as missing",
          openapi_extensions=RANKS_OF.openapi, responses={200: answer(PlayerRanks, _ENTRIES)})
def post_player_ranks(board: str, season: Season = None) -> Response[str]:
    body = RANKS_OF.one(posted(app.current_event))
    return json_response(200, leaderboard.ranks_of(current().ranking, DEFAULT_TREE, board, body.playerIds, season))


@app.get("/v1/leaderboards/<board>/top", operation_id="getTop", responses={200: answer(Entries, _ENTRIES)})
def get_top(board: str, limit: Annotated[int, Query(ge=1, le=leaderboard.MAX_TOP, description=(
                "the most entries: a page stops at about 4 MB as Lambda carries the answer, so it may hold "
                "fewer (follow nextCursor)")), DIGITS] = 10,
            offset: Annotated[int | None, Query(ge=0, le=INT64_MAX, description=(
                "entries to skip; not with cursor. One that lands more than "
                f"{leaderboard.MAX_TIE_SKIP:,} players into those of one score is 400: page there with cursor")),
                              DIGITS] = None,
            season: Season = None,
            cursor: Annotated[str | None, Query(description=(
                "nextCursor of a top or around answer: the entries after its last; its prevCursor: those before its "
                "first. Neither skips nor repeats a player whose score did not change meanwhile (offset counts "
                "positions, which move)"))] = None,
            ) -> Response[str]:
    return json_response(200, leaderboard.top(current().ranking, DEFAULT_TREE, board, limit=limit, offset=offset,
                                              season=season, cursor=cursor))


@app.get("/v1/leaderboards/<board>/around/<player_id>", operation_id="getAround",
         responses={200: answer(Entries, _ENTRIES)})
def get_around(board: str, player_id: PlayerIdParam,
               radius: Annotated[int, Query(ge=0, le=leaderboard.MAX_RADIUS,
                                            description="entries above and below"), DIGITS] = 5,
               season: Season = None) -> Response[str]:
    return json_response(200, leaderboard.around(current().ranking, DEFAULT_TREE, board, player_id, radius=radius,
                                                 season=season))


@app.get("/v1/leaderboards/<board>/rank", operation_id="getRankForScore",
         responses={200: answer(ScoreRank, "the rank that score would have")})
def get_rank(board: str, score: Annotated[int, Query(ge=INT64_MIN, le=INT64_MAX), DIGITS],
             season: Season = None,
             subscore: Annotated[int | None, Query(ge=INT64_MIN, le=INT64_MAX, description=(
                 "on a board whose ties are `subscore`: the rank with this subscore too (after the players of "
                 "the same score and subscore); without it, or with earliest ties, after every player of the "
                 "score")), DIGITS] = None) -> Response[str]:
    return json_response(200, leaderboard.rank_for_score(current().ranking, DEFAULT_TREE, board, score, season,
                                                         subscore=subscore))


_BANS = ("needs a server key. A banned player's records leave every board's ranks and lists, every season, "
         "within the boards' workers' delay (202 once that is asked durably); they keep taking updates, hidden, "
         "and come back when the ban is lifted")


@app.get("/v1/bans", operation_id="listBans", summary="The banned players, by playerId", description=_BANS,
         responses={200: answer(bans.BanPage, "a page of banned players")})
def list_bans(limit: Annotated[int, Query(ge=1, le=bans.MAX_BANS), DIGITS] = 100, cursor: Cursor = None,
              ) -> Response[str]:
    return json_response(200, bans.bans(current().ranking, limit=limit, cursor=cursor))


@app.get("/v1/bans/<player_id>", operation_id="getBan", summary="Whether a player is banned, and since when",
         description=_BANS, responses={200: answer(bans.BannedPlayer, "the player is banned")})
def get_ban(player_id: PlayerIdParam) -> Response[str]:
    return json_response(200, bans.banned_player(current().ranking, player_id))


@app.put("/v1/bans/<player_id>", operation_id="banPlayer", summary="Ban a player from every leaderboard",
         description=_BANS, responses={202: answer(bans.BanChange, "the ban is durable")})
def put_ban(player_id: PlayerIdParam) -> Response[str]:
    a = current()
    return json_response(202, bans.ban(a.ranking, a.log, a.spill, player_id))


@app.delete("/v1/bans/<player_id>", operation_id="liftBan", summary="Lift a player's ban: its records come back",
            description=_BANS, responses={202: answer(bans.BanChange, "the lifting is durable")})
def delete_ban(player_id: PlayerIdParam) -> Response[str]:
    a = current()
    return json_response(202, bans.restore(a.ranking, a.log, a.spill, player_id))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
