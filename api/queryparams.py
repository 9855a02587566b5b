"""Query-string values with the contract's errors, and the parameters each route takes: a query
parameter a route does not declare, or one given twice, is refused rather than silently ignored."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, Sequence

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import BaseMiddlewareHandler, NextMiddleware

from ports.errors import InvalidField, MissingField
from ports.limits import ascii_int
from ports.timeutil import now_ms, parse_time


class Accepts(BaseMiddlewareHandler[APIGatewayRestResolver]):
    """A route's declaration of the query parameters it takes, as a Powertools route middleware:
    `@app.get("/v1/x", middlewares=[Accepts("sku", "limit")])`. Runs before the route."""

    def __init__(self, *names: str) -> None:
        super().__init__()
        self.names = frozenset(names)

    def handler(self, app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[str]:
        event = app.current_event
        # a sample or hand-made event may carry only the single-valued map
        given = event.multi_value_query_string_parameters or {
            name: [value] for name, value in (event.query_string_parameters or {}).items()
        }
        check_names(given, self.names)
        return next_middleware(app)


# the routes that take no query parameter at all
NO_PARAMETERS = Accepts()


def check_names(given: Mapping[str, Sequence[str]], accepted: frozenset[str]) -> None:
    """The error names the first offending parameter in sorted order, whatever order they came in."""
    unknown = sorted(set(given) - accepted)
    if unknown:
        takes = f"it takes {', '.join(sorted(accepted))}" if accepted else "it takes none"
        raise InvalidField(f"{unknown[0]} is not a query parameter of this route; {takes}", unknown[0])
    repeated = sorted(name for name, values in given.items() if len(values) > 1)
    if repeated:
        raise InvalidField(f"{repeated[0]} is given {len(given[repeated[0]])} times; give it once", repeated[0])


def required(params: Mapping[str, str], name: str) -> str:
    value = params.get(name)
    if not value:
        raise MissingField(f"query parameter {name} is required", name)
    return value


def matching(params: Mapping[str, str], name: str, pattern: str, what: str) -> str:
    """A required value that must match `pattern` (what the API takes in a POST, it asks for here)."""
    value = required(params, name)
    if re.fullmatch(pattern, value) is None:
        raise InvalidField(f"{name} must be {what}", name)
    return value


def integer(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    value = ascii_int(text, low, high)
    if value is None:
        raise InvalidField(f"{name} must be an integer from {low} to {high}", name)
    return value


def time(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name)
    return None if text is None else parse_time(text, name)


def time_range(params: Mapping[str, str], default_from: Callable[[int], int]) -> tuple[int, int]:
    """`from` and `to`; `to` defaults to now and `from` to `default_from(to)`."""
    to_param, from_param = time(params, "to"), time(params, "from")
    to_ms = now_ms() if to_param is None else to_param
    from_ms = default_from(to_ms) if from_param is None else from_param
    if to_ms <= from_ms:
        raise InvalidField("to must be after from", "to")
    return from_ms, to_ms


def choice(params: Mapping[str, str], name: str, options: tuple[str, ...]) -> str:
    value = params.get(name, options[0])
    if value not in options:
        raise InvalidField(f"{name} must be one of {', '.join(options)}", name)
    return value


def encode_cursor(kind: str, position: str) -> str:
    """An opaque cursor: where a listing of this `kind` (one letter) stopped."""
    return base64.urlsafe_b64encode(f"{kind}{position}".encode()).decode().rstrip("=")


def cursor(params: Mapping[str, str], kind: str) -> str | None:
    """The position in a `cursor` this API gave out for a listing of this kind; a cursor of another
    listing (or of the same one in the other order) is refused, not read as something else."""
    text = params.get("cursor")
    if text is None:
        return None
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = ""
    if not decoded.startswith(kind):
        raise InvalidField("cursor is not one this listing gave out (with the same order)", "cursor")
    return decoded[len(kind):]
