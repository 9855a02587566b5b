"""Blocks of BENCHMARKS.md between markers of their own: written apart from a full bench (the soak,
measurements taken by hand), which keeps them as they are."""

from __future__ import annotations

import re


def _pattern(begin: str, end: str) -> re.Pattern[str]:
    return re.compile(re.escape(begin) + ".*?" + re.escape(end) + "\n?", re.S)


def find(text: str, begin: str, end: str) -> str:
    """The block of `text` between these markers, markers included, or nothing."""
    found = _pattern(begin, end).search(text)
    return found.group(0) if found else ""


def put(text: str, begin: str, end: str, body: str) -> str:
    """`text` with the block between these markers replaced by `body` (appended if it had none)."""
    marked = f"{begin}\n{body}{end}\n"
    pattern = _pattern(begin, end)
    return pattern.sub(lambda _: marked, text, count=1) if pattern.search(text) else f"{text.rstrip()}\n\n{marked}"
