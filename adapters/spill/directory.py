"""Spill to a local directory: one file per record, written to a temporary name, fsynced, then
renamed, so a file that exists is whole."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.spill.codec import decode, encode, new_spill_id, spilled_at_ms
from ports import OutgoingRecord, SpilledRecord


class DirectorySpillStore:
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        directory.mkdir(parents=True, exist_ok=True)

    def put(self, topic: str, record: OutgoingRecord) -> None:
        spill_id = new_spill_id(topic)
        partial = self._dir / f".{spill_id}.partial"
        with partial.open("wb") as f:
            f.write(encode(topic, record))
            f.flush()
            os.fsync(f.fileno())
        partial.rename(self._dir / f"{spill_id}.json")
        dir_fd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself must survive a crash
        finally:
            os.close(dir_fd)

    def list(self, limit: int) -> list[SpilledRecord]:
        names = sorted(p.name for p in self._dir.glob("*.json"))[:limit]
        return [decode(name.removesuffix(".json"), (self._dir / name).read_bytes()) for name in names]

    def delete(self, spill_id: str) -> None:
        (self._dir / f"{spill_id}.json").unlink(missing_ok=True)

    def purge(self, before_ms: int) -> int:
        old = [p for p in self._dir.glob("*.json") if spilled_at_ms(p.stem) < before_ms]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)
