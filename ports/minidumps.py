"""What a stack walker tells of a minidump (the schema of rust-minidump's `minidump-stackwalk
--json`, the fields Blackbox reads), and the port of the walker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _hex(value: object) -> object:
    return int(value, 16) if isinstance(value, str) else value


Hex = Annotated[int, BeforeValidator(_hex)]


class _Json(BaseModel):
    # the walker's schema: every field may be absent or null, and it grows fields we do not read
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Frame(_Json):
    """One frame of the crashing thread, innermost first."""

    instruction: Hex = Field(alias="offset")
    module: str | None = None
    module_offset: Hex | None = None
    function: str | None = None
    function_offset: Hex | None = None
    file: str | None = None
    line: int | None = None
    # context, cfi, frame_pointer or scan: how the walker found this frame, best first
    trust: str
    missing_symbols: bool = False


class Module(_Json):
    name: str = Field(alias="filename")
    base_address: Hex = Field(alias="base_addr")
    debug_file: str | None = None
    debug_id: str | None = None
    code_id: str | None = None
    missing_symbols: bool = False


class _CrashInfo(_Json):
    type: str | None = None
    address: Hex | None = None


class _Thread(_Json):
    frames: tuple[Frame, ...] = ()


class WalkerReport(_Json):
    """The walker's whole answer, of which Walked keeps what Blackbox reads."""

    status: str | None = None
    crash_info: _CrashInfo = _CrashInfo()
    crashing_thread: _Thread | None = None
    modules: tuple[Module, ...] = ()


@dataclass(frozen=True)
class Walked:
    """What a minidump says about its crash."""

    # e.g. "SIGSEGV /SEGV_MAPERR", "EXCEPTION_ACCESS_VIOLATION_READ"; None for a dump written without a crash
    crash_reason: str | None
    crash_address: int | None
    frames: tuple[Frame, ...]
    modules: tuple[Module, ...]

    @property
    def frame_modules(self) -> tuple[Module, ...]:
        """The modules of the crashing thread's frames."""
        return self._modules_of(self.frames)

    @property
    def modules_missing_symbols(self) -> tuple[Module, ...]:
        """The modules of the crashing thread's frames that had no symbols: when theirs arrive,
        the report is worth walking again."""
        return self._modules_of([frame for frame in self.frames if frame.missing_symbols])

    def _modules_of(self, frames: Sequence[Frame]) -> tuple[Module, ...]:
        """Each frame's module: the one of its name at its base (its address less its offset), not
        every one of that name, which a dump may list thousands of times; by name alone where the
        walker gave no offset."""
        at = {(f.module, f.instruction - f.module_offset) for f in frames if f.module_offset is not None}
        named = {f.module for f in frames if f.module_offset is None}
        return tuple(m for m in self.modules if (m.name, m.base_address) in at or m.name in named)

    @property
    def missing_symbols(self) -> bool:
        return any(frame.missing_symbols for frame in self.frames)


@dataclass(frozen=True)
class WalkFailed:
    """The minidump could not be read (truncated, not a minidump, or the walker gave up)."""

    reason: str


# a walk's deadline of wall time: past it the machine, not the dump, is at fault (WalkLate)
WALK_WALL_S = 60.0


class WalkLate(Exception):
    """The walk outlasted its deadline of wall time within its budget of CPU: a busy machine's doing,
    not the dump's, so the report is walked again later rather than marked failed."""


# the crashing thread's frames a walk keeps: a runaway scan of a corrupt stack finds thousands
MAX_FRAMES = 256


class StackWalker(Protocol):
    def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
        """Walks the crashing thread of `minidump` (its first MAX_FRAMES frames), with the `.sym`
        files under `symbols` (symbol-server layout; an empty or missing directory walks without
        symbols). Raises WalkLate when the machine left it too little of the cores."""
        ...
