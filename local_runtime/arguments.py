"""Numbers the command line's options take: each within what its command can do, said in one line
when not (an infinite rate ran the load generator out of memory, a worker count of 11 digits made a
list of as many before starting any)."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

N = TypeVar("N", int, float)

_INTEGER = re.compile(r"-?[0-9]+")


def integer(text: str) -> int:
    """ASCII digits: int() would also take "1_000", spaces and other scripts' digits, but not "²"."""
    if _INTEGER.fullmatch(text) is None:
        raise ValueError(text)
    return int(text)


def bounded(parse: Callable[[str], N], low: N, high: N, what: str) -> Callable[[str], N]:
    """An argparse type: the number `parse` reads, within [low, high] (never NaN nor infinite),
    else "'text' is not `what`"."""

    def number(text: str) -> N:
        try:
            value = parse(text)
        except ValueError:
            value = math.nan  # type: ignore[assignment]
        if not low <= value <= high:  # NaN is within nothing
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return number


# the keys a command sends (not those serve takes: BLACKBOX_API_KEYS__*), from the environment where
# the command line names none: an option's value is every local user's to read in `ps`
KEY = "BLACKBOX_KEY"
SERVER_KEY = "BLACKBOX_SERVER_KEY"
READ_KEY = "BLACKBOX_READ_KEY"


def key_option(parser: argparse.ArgumentParser, flag: str, help: str, *variables: str) -> None:
    """`flag`, else the first of `variables` set."""
    default = next((os.environ[v] for v in variables if os.environ.get(v)), None)
    named = " or ".join(f"${v}" for v in variables)
    parser.add_argument(flag, default=default, help=f"{help}; default: {named} (an option's value shows in ps to "
                        "every user)")


def data_dir(text: str) -> Path:
    """A --data-dir: an empty one would be the current directory, a repository's or a home's."""
    if not text:
        raise argparse.ArgumentTypeError("'' is not a directory; pass one, e.g. --data-dir blackbox-data")
    return Path(text)
