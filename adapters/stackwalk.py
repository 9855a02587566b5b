"""Minidumps read by rust-minidump (the stack walker Socorro and Sentry run): `blackbox-stackwalk`
(stackwalk/, its minidump-processor behind a small main, printing `minidump-stackwalk --json`'s
report), symbolicated with Breakpad `.sym` files kept in the symbol-server layout
(`<debug file>/<debug id>/<debug file less .pdb>.sym`).

The walker is a separate process on purpose: a minidump is untrusted input, so it runs with a
deadline and a cap on what it may print, and whatever it does with a hostile dump, the caller
gets a `WalkFailed` with the reason instead of a crash or a hang."""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ports.errors import InvalidField

WALKER = "blackbox-stackwalk"
# `make test` builds it here (the Makefile's .tools/bin/blackbox-stackwalk)
_REPO_WALKER = Path(__file__).resolve().parents[1] / ".tools" / "bin" / WALKER
WALKER_ENV = "BLACKBOX_STACKWALK"


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


class _Report(_Json):
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
    def modules_missing_symbols(self) -> tuple[Module, ...]:
        """The modules of the crashing thread's frames that had no symbols: when theirs arrive,
        the report is worth walking again."""
        names = {frame.module for frame in self.frames if frame.missing_symbols}
        return tuple(module for module in self.modules if module.name in names)

    @property
    def missing_symbols(self) -> bool:
        return any(frame.missing_symbols for frame in self.frames)


@dataclass(frozen=True)
class WalkFailed:
    """The minidump could not be read (truncated, not a minidump, or the walker gave up)."""

    reason: str


class Stackwalker:
    """Runs the walker on one minidump at a time."""

    def __init__(self, binary: Path, *, timeout_s: float = 30.0, max_output_bytes: int = 32 << 20) -> None:
        self.binary = binary
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes

    @classmethod
    def installed(cls) -> Stackwalker:
        """The walker named by BLACKBOX_STACKWALK, else the repository's (`make test` builds it),
        else the one on PATH."""
        named = os.environ.get(WALKER_ENV)
        if named:
            return cls(Path(named))
        if _REPO_WALKER.exists():
            return cls(_REPO_WALKER)
        on_path = shutil.which(WALKER)
        if on_path is None:
            raise FileNotFoundError(f"{WALKER}: set {WALKER_ENV}, or run `make .tools/bin/{WALKER}`")
        return cls(Path(on_path))

    def walk(self, minidump: bytes, symbols: Path) -> Walked | WalkFailed:
        """Walks the crashing thread of `minidump`, with the `.sym` files under `symbols`
        (symbol-server layout; an empty or missing directory walks without symbols)."""
        with tempfile.TemporaryDirectory(prefix="blackbox-stackwalk-") as scratch:
            dump = Path(scratch) / "crash.dmp"
            dump.write_bytes(minidump)
            ran = self._run([str(self.binary), str(dump), str(symbols)])
        if isinstance(ran, WalkFailed):
            return ran
        code, out, err = ran
        if code != 0:
            return WalkFailed(_last_line(err) or f"{WALKER} exited with {code}")
        try:
            report = _Report.model_validate_json(out)
        except ValidationError as invalid:
            return WalkFailed(f"{WALKER} printed an unexpected report: {invalid.errors()[0]['msg']}")
        if report.status not in (None, "OK"):
            return WalkFailed(f"{WALKER}: {report.status}")
        if report.crashing_thread is None:
            return WalkFailed("the minidump names no crashing thread")
        return Walked(
            crash_reason=report.crash_info.type,
            crash_address=report.crash_info.address,
            frames=report.crashing_thread.frames,
            modules=report.modules,
        )

    def _run(self, command: list[str]) -> tuple[int, bytes, bytes] | WalkFailed:
        """The command's exit code and output, read as it comes so that neither the deadline nor
        the output cap can be outrun."""
        deadline = time.monotonic() + self.timeout_s
        with subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as walker:
            assert walker.stdout is not None and walker.stderr is not None
            out, err = walker.stdout.fileno(), walker.stderr.fileno()
            output = {out: bytearray(), err: bytearray()}
            with selectors.DefaultSelector() as selector:
                for fd in output:
                    selector.register(fd, selectors.EVENT_READ)
                while selector.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        walker.kill()
                        return WalkFailed(f"{WALKER} took longer than {self.timeout_s:g} s")
                    for key, _ in selector.select(left):
                        chunk = os.read(key.fd, 1 << 16)
                        if not chunk:
                            selector.unregister(key.fd)
                        output[key.fd] += chunk
                    if len(output[out]) + len(output[err]) > self.max_output_bytes:
                        walker.kill()
                        return WalkFailed(f"{WALKER} printed more than {self.max_output_bytes} bytes")
            try:
                code = walker.wait(max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                walker.kill()
                return WalkFailed(f"{WALKER} took longer than {self.timeout_s:g} s")
            return code, bytes(output[out]), bytes(output[err])


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


class SymbolFileRefused(InvalidField):
    """An upload that is not a Breakpad symbol file."""


# Breakpad's first line: MODULE <os> <arch> <debug id> <debug file>; the id is a GUID or build id
# and an age, in hex; the file is the rest of the line (a PDB's name may hold spaces)
_MODULE_LINE = re.compile(r"MODULE (\S+) (\S+) ([0-9A-Fa-f]{33,40}) (.+)")
_FIRST_LINE_MAX = 4096


@dataclass(frozen=True)
class SymbolFileId:
    os: str
    arch: str
    debug_id: str
    debug_file: str

    @property
    def path(self) -> PurePosixPath:
        """Where a symbol server (and the walker) looks for it: a PDB's `.sym` drops the `.pdb`."""
        stem = self.debug_file[:-4] if self.debug_file.lower().endswith(".pdb") else self.debug_file
        return PurePosixPath(self.debug_file, self.debug_id, f"{stem}.sym")


def symbol_file_id(sym: bytes) -> SymbolFileId:
    """The identity of a Breakpad `.sym` file, from its first line; SymbolFileRefused when that
    line is not a MODULE record with a plain file name (it becomes a path)."""
    first, newline, _ = sym[:_FIRST_LINE_MAX].partition(b"\n")
    if not newline and len(sym) > _FIRST_LINE_MAX:
        raise SymbolFileRefused("a Breakpad symbol file's first line is a short MODULE record", field="file")
    try:
        line = first.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        raise SymbolFileRefused("a Breakpad symbol file starts with a UTF-8 MODULE line", field="file") from None
    match = _MODULE_LINE.fullmatch(line)
    if match is None:
        raise SymbolFileRefused(
            "not a Breakpad symbol file: the first line must be MODULE <os> <arch> <debug id> <debug file>",
            field="file",
        )
    os_name, arch, debug_id, debug_file = match.groups()
    if debug_file in (".", "..") or any(character in debug_file for character in "/\\\0"):
        raise SymbolFileRefused(f"the debug file {debug_file!r} is not a plain file name", field="file")
    return SymbolFileId(os=os_name, arch=arch, debug_id=debug_id.upper(), debug_file=debug_file)
