"""Leaderboards: the boards, board settings, a player's rank, top-N, around a player, the rank of a
score. Each GET route declares the query parameters it takes; any other is refused."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.queryparams import NO_PARAMETERS, Accepts
from api.resolver import create_resolver, json_response, posted
from ports.telemetry import instrumented
from ranking import leaderboard
from ranking.tree import DEFAULT_TREE

app = create_resolver()


@app.get("/v1/leaderboards", middlewares=[Accepts(*leaderboard.LIST_PARAMETERS)])
def list_boards() -> Response[str]:
    return json_response(200, leaderboard.boards(current().ranking, app.current_event.query_string_parameters))


@app.put("/v1/leaderboards/<board>")
def put_board(board: str) -> Response[str]:
    return json_response(200, leaderboard.configure(current().ranking, board, posted(app.current_event)))


@app.get("/v1/leaderboards/<board>", middlewares=[NO_PARAMETERS])
def get_board(board: str) -> Response[str]:
    return json_response(200, leaderboard.describe(current().ranking, DEFAULT_TREE, board))


@app.get("/v1/leaderboards/<board>/players/<player_id>", middlewares=[NO_PARAMETERS])
def get_player(board: str, player_id: str) -> Response[str]:
    return json_response(200, leaderboard.player(current().ranking, DEFAULT_TREE, board, player_id))


@app.get("/v1/leaderboards/<board>/top", middlewares=[Accepts("limit", "offset")])
def get_top(board: str) -> Response[str]:
    params = app.current_event.query_string_parameters
    return json_response(200, leaderboard.top(current().ranking, DEFAULT_TREE, board, params))


@app.get("/v1/leaderboards/<board>/around/<player_id>", middlewares=[Accepts("radius")])
def get_around(board: str, player_id: str) -> Response[str]:
    params = app.current_event.query_string_parameters
    return json_response(200, leaderboard.around(current().ranking, DEFAULT_TREE, board, player_id, params))


@app.get("/v1/leaderboards/<board>/rank", middlewares=[Accepts("score")])
def get_rank(board: str) -> Response[str]:
    params = app.current_event.query_string_parameters
    return json_response(200, leaderboard.rank_for_score(current().ranking, DEFAULT_TREE, board, params))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
