"""The query and path values of the contract, typed once: each carries its bounds, which Powertools
checks from a route's signature (and writes into the OpenAPI document), and parses as the contract
says. A route takes `Annotated[int, Query(ge=1, le=100), DIGITS] = 20`, say, and its handler hands the
domain plain values."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from ports.limits import ASCII_INT, SKU_CHARS, SKU_PATTERN
from ports.timeutil import FIRST_MS, LAST_MS, parse_epoch_ms


def _digits(value: object) -> object:
    # pydantic's own integers also take " 5", "+5", "1_000" and "١٢"
    if isinstance(value, str) and ASCII_INT.fullmatch(value) is None:
        raise PydanticCustomError("integer", "must be an integer in ASCII digits")
    return value


def _time(value: object) -> object:
    if not isinstance(value, str):
        return value
    try:
        return parse_epoch_ms(value)
    except ValueError as exc:
        raise PydanticCustomError("time", str(exc)) from None


# what a URL may carry for a time: the document says both forms (the handler sees epoch ms)
_TIME = WithJsonSchema({"anyOf": [{"type": "integer", "minimum": FIRST_MS, "maximum": LAST_MS},
                                  {"type": "string", "format": "date-time"}]})

DIGITS = BeforeValidator(_digits)
"""With an integer's Query: ASCII digits only, as every integer the API reads."""

Sku = Annotated[str, Query(pattern=SKU_PATTERN, description=SKU_CHARS)]
From = Annotated[int | None, Query(alias="from", description="RFC 3339 with a zone, or epoch ms"),
                 BeforeValidator(_time), _TIME]
To = Annotated[int | None, Query(description="RFC 3339 with a zone, or epoch ms; after from"), BeforeValidator(_time),
               _TIME]
Cursor = Annotated[str | None, Query(description="nextCursor of the previous page")]
Season = Annotated[int | None, Query(description=(
    "a season of the board by its start, as GET .../seasons lists it (RFC 3339 with a zone, or epoch ms; a "
    "board's first season starts at 0); the current season when left out")), BeforeValidator(_time), _TIME]
