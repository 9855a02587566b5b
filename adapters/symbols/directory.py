"""Symbol files in a local directory, in the symbol-server layout itself: the stack walker reads
the store's own root."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from adapters.symbols.layout import DEPTH, SUFFIX, checked, fsync_directory, staged
from ports import SymbolFile


class DirectorySymbolStore:
    def __init__(self, root: Path) -> None:
        self._root = root
        root.mkdir(parents=True, exist_ok=True)

    def put(self, path: str, data: bytes, uploaded_at: int) -> bool:
        target = self._root / checked(path)
        partial = staged(target, [data])
        ns = uploaded_at * 1_000_000
        os.utime(partial, ns=(ns, ns))  # the mtime is the file's uploaded_at
        try:
            # a link fails where a file is: of two puts of a new path, exactly one is told it is new
            os.link(partial, target)
        except FileExistsError:
            os.replace(partial, target)  # a reader has the old file open or the new one, never half
            # a delete may since have taken the file and its directory: nothing of this put left to keep
            with contextlib.suppress(FileNotFoundError):
                fsync_directory(target.parent)
            return False
        fsync_directory(target.parent)  # the partial, still there, keeps the directory from a delete
        partial.unlink()
        return True

    def files(self, after: str, limit: int) -> list[SymbolFile]:
        found: list[SymbolFile] = []
        if limit < 1:
            return found
        for path in self._paths_after(after):
            try:
                stat = (self._root / path).stat()
            except FileNotFoundError:
                continue  # deleted since listed
            found.append(SymbolFile(path, stat.st_size, stat.st_mtime_ns // 1_000_000))
            if len(found) == limit:
                break
        return found

    def _paths_after(self, after: str) -> Iterator[str]:
        """The layout's paths past `after`, in order, reading only the directories that may hold
        some: each path under a directory begins with its path and a slash, so the directories are
        walked in the order of that, and one whose is below `after`'s beginning is passed over."""

        def walk(directory: Path, prefix: str, depth: int) -> Iterator[str]:
            try:
                with os.scandir(directory) as listing:
                    # a symbol file's directories, or at its depth its files: other entries are no one's
                    entries = [entry.name for entry in listing
                               if (entry.is_file() if depth == DEPTH else entry.is_dir())]
            except (FileNotFoundError, NotADirectoryError):
                return  # deleted since its parent was read
            if depth == DEPTH:
                yield from sorted(path for name in entries if name.endswith(SUFFIX) and (path := prefix + name) > after)
                return
            for name in sorted(entries, key=lambda name: name + "/"):
                below = f"{prefix}{name}/"
                if below >= after[:len(below)]:
                    yield from walk(directory / name, below, depth + 1)

        return walk(self._root, "", 1)

    def delete(self, path: str) -> bool:
        target = self._root / checked(path)
        try:
            target.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:  # no file of this store can have such a name
                return False
            raise
        for directory in (target.parent, target.parent.parent):
            try:
                directory.rmdir()
            except OSError:
                break  # another file's directory too
        return True

    def local(self, paths: Sequence[str]) -> tuple[Path, bool]:
        """The root itself: a walk of it already reads the store as it is, so nothing is ever made."""
        for path in paths:
            checked(path)
        return self._root, False
