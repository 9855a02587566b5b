"""Query-string values with the contract's errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from core.errors import InvalidField, MissingField
from core.limits import ascii_int
from core.timeutil import now_ms, parse_time


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
