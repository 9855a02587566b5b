"""Crash signatures: crashes whose stack traces differ only in addresses, offsets, line numbers or
frame indices share one. A deterministic hash of the top normalised frames, under the sku's
grouping rules (ports.issues.GroupingRules; none by default)."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from ports.issues import GroupingRules

TOP_FRAMES = 5
DEFAULT_RULES = GroupingRules()
# what of a trace its signature reads at most: its top frames are among its first lines, where a
# trace may be a body's size of lines that are no frame, read again for each group a listing shows
READS_LINES = 1000
READS_CHARS = 64 * 1024
# what str.splitlines splits at
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")

# Each expression reads a line in time linear in its length: a frame line may be as long as a body
# (1 MiB), and a pattern that can start again inside a run it has just read (`\s*` before a `+`,
# `(?::\d+)+` before the end) costs the square of the run's length. So an offset's spaces are taken
# only from where they begin, and the line numbers at the end are found from the end (_trailing_numbers)
_FRAME_INDEX = re.compile(r"^\s*(?:#\s*\d+|\[\s*\d+\s*\]|frame\s+\d+:?|\d+)\s+", re.IGNORECASE)
_OFFSET = re.compile(r"(?<!\s)\s*\+\s*(?:0x)?[0-9a-f]+\b", re.IGNORECASE)
_ADDRESS = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{8,16}\b", re.IGNORECASE)
_LINE_WORD = re.compile(r"\bline\s+\d+", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
# frames of the crash reporter itself or the OS's signal delivery: the same in every crash. Named
# by the reporters' namespaces and prefixes, and raise/abort only unqualified: a game's
# SentryTurret::Fire, Quest::abort or MinidumpViewer is its own code, and its crash
_HANDLER_FRAMES = re.compile(
    r"\b(?:google_breakpad|breakpad|crashpad|sentry|crashhandler)::|\bcrash_?handler\b|\bminidump_writer\b"
    r"|\bsentry_sdk\b|\bsentry__|\bsentry_(?:capture|handle)|\bsentry\.(?:unity|native|unreal)\b"
    r"|__gi_raise|(?<![\w:.])(?:raise|abort)\b"
    r"|_sigtramp|__restore_rt|kiuserexceptiondispatcher|rtldispatchexception|unhandledexceptionfilter",
    re.IGNORECASE,
)


def normalise_frame(line: str) -> str:
    frame = _FRAME_INDEX.sub("", line)
    frame = _OFFSET.sub("", frame)
    frame = _LINE_WORD.sub("", _trailing_numbers(frame))
    frame = _ADDRESS.sub("", frame)
    return _SPACE.sub(" ", frame).strip(" \t()[]@:")


def _trailing_numbers(frame: str) -> str:
    """`frame` without the `:line:column` numbers it ends with (before a `)` and spaces, if any)."""
    body = frame.rstrip()
    end = len(body) - body.endswith(")")
    start = end
    while True:
        digits = start
        while digits > 0 and body[digits - 1].isdecimal():  # what \d takes
            digits -= 1
        if digits in (start, 0) or body[digits - 1] != ":":
            return frame[:start] + frame[end:]
        start = digits - 1


def top_frames(stack_trace: str, rules: GroupingRules = DEFAULT_RULES, count: int = TOP_FRAMES) -> list[str]:
    return grouped(filter(None, map(normalise_frame, _first_lines(stack_trace))), rules, count)


def _first_lines(text: str) -> Iterator[str]:
    """The trace's lines as splitlines gives them, read as they are asked for (the top frames are
    found in the first few), READS_LINES and READS_CHARS at most: a line past the characters is cut."""
    start, end = 0, min(len(text), READS_CHARS)
    for _ in range(READS_LINES):
        if start >= end:
            return
        found = _LINE_BREAK.search(text, start, end)
        if found is None:
            yield text[start:end]
            return
        yield text[start:found.start()]
        start = found.end()


def grouped(frames: Iterable[str], rules: GroupingRules = DEFAULT_RULES, count: int = TOP_FRAMES) -> list[str]:
    """The elements of a signature, innermost first: the frames but the crash handler's and those a
    `skip` glob matches; a frame a `join` glob matches takes the next one into its element (`a | b`),
    as Socorro's prefix list does for allocators and other frames that say nothing alone."""
    skip, join = _matcher(rules.skip), _matcher(rules.join)
    # each element's frames, joined at the end: a chain as long as a trace, added to a string frame
    # by frame, cost the square of its length
    elements: list[list[str]] = []
    joining = False
    for frame in frames:
        if _HANDLER_FRAMES.search(frame) or (skip is not None and skip(frame)):
            continue
        if joining:
            elements[-1].append(frame)
        elif len(elements) == count:
            break
        else:
            elements.append([frame])
        joining = join is not None and join(frame) is not None
    return [" | ".join(element) for element in elements]


@functools.lru_cache(maxsize=1024)
def _matcher(globs: tuple[str, ...]) -> Callable[[str], object] | None:
    """One expression for all of a list's globs. fnmatch's translation of `*` cannot backtrack
    catastrophically, and a rule's length is bounded (crashes.grouping)."""
    if not globs:
        return None
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs)).match


def signature(stack_trace: str | None, rules: GroupingRules = DEFAULT_RULES) -> str | None:
    if not stack_trace:
        return None
    return _digest(top_frames(stack_trace, rules))


def frames_signature(frames: Sequence[str], rules: GroupingRules = DEFAULT_RULES) -> str | None:
    """The signature of frames already reduced to what groups them (a walked minidump's
    functions, or module@offset without symbols), innermost first."""
    return _digest(grouped(frames, rules))


def _digest(frames: Sequence[str]) -> str | None:
    return hashlib.sha256("\n".join(frames).encode()).hexdigest()[:16] if frames else None
