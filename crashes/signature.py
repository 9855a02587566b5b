"""Crash signatures: crashes whose stack traces differ only in addresses, offsets, line numbers or
frame indices share one. A deterministic hash of the top normalised frames."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

TOP_FRAMES = 5

_FRAME_INDEX = re.compile(r"^\s*(?:#\s*\d+|\[\s*\d+\s*\]|frame\s+\d+:?|\d+)\s+", re.IGNORECASE)
_OFFSET = re.compile(r"\s*\+\s*(?:0x)?[0-9a-f]+\b", re.IGNORECASE)
_ADDRESS = re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{8,16}\b", re.IGNORECASE)
_LINE = re.compile(r"(?::\d+)+(?=\)?\s*$)|\bline\s+\d+", re.IGNORECASE)
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
    frame = _LINE.sub("", frame)
    frame = _ADDRESS.sub("", frame)
    return _SPACE.sub(" ", frame).strip(" \t()[]@:")


def top_frames(stack_trace: str, count: int = TOP_FRAMES) -> list[str]:
    frames = []
    for line in stack_trace.splitlines():
        frame = normalise_frame(line)
        if frame and not _HANDLER_FRAMES.search(frame):
            frames.append(frame)
            if len(frames) == count:
                break
    return frames


def signature(stack_trace: str | None) -> str | None:
    if not stack_trace:
        return None
    return _digest(top_frames(stack_trace))


def frames_signature(frames: Sequence[str]) -> str | None:
    """The signature of frames already reduced to what groups them (a walked minidump's
    functions, or module@offset without symbols), innermost first; the crash handler's skipped."""
    return _digest([frame for frame in frames if not _HANDLER_FRAMES.search(frame)][:TOP_FRAMES])


def _digest(frames: Sequence[str]) -> str | None:
    return hashlib.sha256("\n".join(frames).encode()).hexdigest()[:16] if frames else None
