"""Query-string values with the contract's errors."""

from __future__ import annotations

from collections.abc import Mapping

from core.errors import InvalidField, MissingField
from core.timeutil import parse_time


def required(params: Mapping[str, str], name: str) -> str:
    value = params.get(name)
    if not value:
        raise MissingField(f"query parameter {name} is required", name)
    return value


def integer(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidField(f"{name} must be an integer", name) from None
    if not low <= value <= high:
        raise InvalidField(f"{name} must be between {low} and {high}", name)
    return value


def time(params: Mapping[str, str], name: str) -> int | None:
    text = params.get(name)
    return None if text is None else parse_time(text, name)


def choice(params: Mapping[str, str], name: str, options: tuple[str, ...]) -> str:
    value = params.get(name, options[0])
    if value not in options:
        raise InvalidField(f"{name} must be one of {', '.join(options)}", name)
    return value
