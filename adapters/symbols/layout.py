"""The symbol-server layout both symbol stores keep on disk: `<debug file>/<debug id>/<name>.sym`
under a root, which the stack walker reads as a directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

DEPTH = 3
SUFFIX = ".sym"
# a file being written: never a layout file's name, so a listing passes over it
PARTIAL = ".partial"


def checked(path: str) -> str:
    """The path, if it names a file of the layout and nothing outside its root (ValueError else).
    The domain validates first: this keeps a path that slipped through from leaving the root."""
    parts = path.split("/")
    if ("\\" in path or "\0" in path or len(parts) != DEPTH or not parts[-1].endswith(SUFFIX)
            or any(part in ("", ".", "..") for part in parts)):
        raise ValueError(f"not a symbol file path: {path!r}")
    return path


def staged(target: Path, chunks: Iterable[bytes]) -> Path:
    """A new file beside `target` (same directory, so a rename onto it is atomic) holding the
    chunks, flushed to disk."""
    while True:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=PARTIAL)
            break
        except (FileNotFoundError, FileExistsError):
            # a delete removed a directory, emptied, while it was made or before the file was (the
            # file, once there, keeps its directory from a delete's rmdir); not a file in its place
            if target.parent.is_file() or target.parent.parent.is_file():
                raise
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        os.unlink(name)  # a full disk's partial file would hold its bytes until the process ends
        raise
    return Path(name)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself must survive a crash
    finally:
        os.close(fd)
