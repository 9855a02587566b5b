"""Calls let go together on threads of their own: two API workers (or functions) at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def at_once(count: int, call: Callable[[int], T]) -> list[T]:
    """`call(i)` for each i below `count`, on as many threads, let go together."""
    start = threading.Barrier(count)

    def together(i: int) -> T:
        start.wait()
        return call(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(together, range(count)))
