"""Breakpad symbol files: their identity, read from their first line, names the path a symbol
server (and the stack walker) finds them at."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from ports.errors import InvalidField
from ports.limits import routed


class SymbolFileRefused(InvalidField):
    """An upload that is not a Breakpad symbol file."""


# a debug id, as a MODULE line and DELETE /v1/symbols/{debugFile}/{debugId} give it: a GUID or build
# id and an age, in hex
DEBUG_ID = r"[0-9A-Fa-f]{33,40}"
# Breakpad's first line: MODULE <os> <arch> <debug id> <debug file>; the file is the rest of the
# line (a PDB's name may hold spaces)
_MODULE_LINE = re.compile(rf"MODULE (\S+) (\S+) ({DEBUG_ID}) (.+)")
_FIRST_LINE_MAX = 4096
# a file name, as a file system and DELETE /v1/symbols/{debugFile}/{debugId} take one
MAX_DEBUG_FILE_CHARS = 255
# what a file system's name holds (255 bytes) less the ".sym" its file adds, in UTF-8
MAX_DEBUG_FILE_BYTES = 251
# a symbol path a walk may await (awaiting_symbols.symbol_path's width)
MAX_SYMBOL_PATH_CHARS = 512
_LONGEST_ID = "0" * 40


def storable(debug_file: str) -> bool:
    """Whether a debug file can name the directory and the file of the layout, and be named again
    by DELETE /v1/symbols/{debugFile}/{debugId}: a plain name of the characters a route takes,
    within a file name's bytes, whose symbol path a walk can await."""
    path = symbol_path(debug_file, _LONGEST_ID)
    # a `.pdb` alone would make a file `.sym`, of no name
    return (debug_file not in (".", "..") and len(debug_file.encode()) <= MAX_DEBUG_FILE_BYTES
            and routed(debug_file) and len(str(path)) <= MAX_SYMBOL_PATH_CHARS and path.name != ".sym")


@dataclass(frozen=True)
class SymbolFileId:
    os: str
    arch: str
    debug_id: str
    debug_file: str

    @property
    def path(self) -> PurePosixPath:
        return symbol_path(self.debug_file, self.debug_id)


def symbol_path(debug_file: str, debug_id: str) -> PurePosixPath:
    """Where a symbol server (and the walker) looks for a module's symbols: a PDB's `.sym` drops
    the `.pdb`; a module's file may be named by its full path (a Linux module's is)."""
    name = PurePosixPath(debug_file.replace("\\", "/")).name
    stem = name[:-4] if name.lower().endswith(".pdb") else name
    return PurePosixPath(name, debug_id.upper(), f"{stem}.sym")


def symbol_file_id(sym: bytes) -> SymbolFileId:
    """The identity of a Breakpad `.sym` file, from its first line; SymbolFileRefused when that
    line is not a MODULE record with a plain file name (it becomes a path)."""
    first, newline, _ = sym[:_FIRST_LINE_MAX].partition(b"\n")
    if not newline and len(sym) > _FIRST_LINE_MAX:
        raise SymbolFileRefused("a Breakpad symbol file's first line is a short MODULE record", field="body")
    try:
        line = first.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        raise SymbolFileRefused("a Breakpad symbol file starts with a UTF-8 MODULE line", field="body") from None
    match = _MODULE_LINE.fullmatch(line)
    if match is None:
        raise SymbolFileRefused(
            "not a Breakpad symbol file: the first line must be MODULE <os> <arch> <debug id> <debug file>",
            field="body",
        )
    os_name, arch, debug_id, debug_file = match.groups()
    if not storable(debug_file):
        raise SymbolFileRefused(f"the debug file {debug_file!r} is not a plain file name of printing characters "
                                f"within {MAX_DEBUG_FILE_BYTES} bytes of UTF-8 (its symbol path within "
                                f"{MAX_SYMBOL_PATH_CHARS} characters)", field="body")
    return SymbolFileId(os=os_name, arch=arch, debug_id=debug_id.upper(), debug_file=debug_file)
