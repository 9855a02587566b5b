"""Leaderboards: the boards, board settings, a player's rank, top-N, around a player, the rank of a
score. Each route's signature is its part of the contract: the query parameters it takes, typed
and bounded; any other is refused (api.resolver.declared_only)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.params import DIGITS, Cursor
from api.requests import JsonBody
from api.resolver import answer, create_resolver, json_response, posted
from ports.limits import INT64_MAX, INT64_MIN
from ports.telemetry import instrumented
from ranking import leaderboard
from ranking.leaderboard import Board, BoardPage, BoardSettings, Entries, RankedEntry, ScoreRank
from ranking.model import NAME_PATTERN, BoardSettingsBody
from ranking.tree import DEFAULT_TREE

app = create_resolver()
_ENTRIES = "ranked entries; ties share a rank and are ordered by playerId"


@app.get("/v1/leaderboards", operation_id="listBoards", summary="The leaderboards by name, with their settings",
         responses={200: answer(BoardPage, "a page of boards")})
def list_boards(limit: Annotated[int, Query(ge=1, le=leaderboard.MAX_BOARDS), DIGITS] = 100,
                cursor: Cursor = None) -> Response[str]:
    return json_response(200, leaderboard.boards(current().ranking, limit=limit, cursor=cursor))


SETTINGS = JsonBody(BoardSettingsBody)


@app.put("/v1/leaderboards/<board>", operation_id="putBoard", description="needs a server key",
         openapi_extensions=SETTINGS.openapi, responses={200: answer(BoardSettings, "the board's settings")})
def put_board(board: Annotated[str, Path(pattern=NAME_PATTERN, description="1 to 128 of A-Z a-z 0-9 . _ : -")],
              ) -> Response[str]:
    settings = SETTINGS.one(posted(app.current_event))
    return json_response(200, leaderboard.configure(current().ranking, board, settings))


@app.get("/v1/leaderboards/<board>", operation_id="getBoard",
         responses={200: answer(Board, "settings and player count")})
def get_board(board: str) -> Response[str]:
    return json_response(200, leaderboard.describe(current().ranking, DEFAULT_TREE, board))


@app.get("/v1/leaderboards/<board>/players/<player_id>", operation_id="getPlayer",
         responses={200: answer(RankedEntry, "the player's score and exact rank (ties share a rank)")})
def get_player(board: str, player_id: str) -> Response[str]:
    return json_response(200, leaderboard.player(current().ranking, DEFAULT_TREE, board, player_id))


@app.get("/v1/leaderboards/<board>/top", operation_id="getTop", responses={200: answer(Entries, _ENTRIES)})
def get_top(board: str, limit: Annotated[int, Query(ge=1, le=leaderboard.MAX_TOP), DIGITS] = 10,
            offset: Annotated[int, Query(ge=0, le=INT64_MAX, description="entries to skip"), DIGITS] = 0,
            ) -> Response[str]:
    return json_response(200, leaderboard.top(current().ranking, DEFAULT_TREE, board, limit=limit, offset=offset))


@app.get("/v1/leaderboards/<board>/around/<player_id>", operation_id="getAround",
         responses={200: answer(Entries, _ENTRIES)})
def get_around(board: str, player_id: str,
               radius: Annotated[int, Query(ge=0, le=leaderboard.MAX_RADIUS,
                                            description="entries above and below"), DIGITS] = 5) -> Response[str]:
    return json_response(200, leaderboard.around(current().ranking, DEFAULT_TREE, board, player_id, radius=radius))


@app.get("/v1/leaderboards/<board>/rank", operation_id="getRankForScore",
         responses={200: answer(ScoreRank, "the rank that score would have")})
def get_rank(board: str, score: Annotated[int, Query(ge=INT64_MIN, le=INT64_MAX), DIGITS]) -> Response[str]:
    return json_response(200, leaderboard.rank_for_score(current().ranking, DEFAULT_TREE, board, score))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
