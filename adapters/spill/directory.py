"""Spill to a local directory: one file per record, written to a temporary name, fsynced, then
renamed, so a file that exists is whole."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.spill.codec import Unreadable, decode, encode, is_spill_id, new_spill_id, spilled_at_ms
from ports import OutgoingRecord, SpilledRecord
from ports.telemetry import logger

# the suffixes of the files set aside (`.<spill id>.<why>`): those that do not decode, those the log refuses
_UNREADABLE, _REFUSED = "unreadable", "refused"


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

    def _ids(self) -> list[str]:
        """The spills' ids, oldest first; another file here is none of the store's."""
        return sorted(spill_id for p in self._dir.glob("*.json") if is_spill_id(spill_id := p.stem))

    def list(self, limit: int) -> list[SpilledRecord]:
        spilled: list[SpilledRecord] = []
        for spill_id in self._ids():
            if len(spilled) == limit:
                break
            path = self._dir / f"{spill_id}.json"
            try:
                spilled.append(decode(spill_id, path.read_bytes()))
            except FileNotFoundError:  # replayed meanwhile, by another replay
                continue
            except Unreadable as exc:
                # set aside, for the operator: read at every listing it would hold back none but log each time
                aside = self._set_aside(spill_id, _UNREADABLE)
                logger.error("a spilled file does not decode; set aside", extra={"path": str(aside),
                                                                                  "error": str(exc)})
        return spilled

    def delete(self, spill_id: str) -> None:
        (self._dir / f"{spill_id}.json").unlink(missing_ok=True)

    def set_aside(self, spill_id: str) -> bool:
        try:
            self._set_aside(spill_id, _REFUSED)
        except FileNotFoundError:  # by another replay meanwhile
            return False
        return True

    def _set_aside(self, spill_id: str, why: str) -> Path:
        aside = self._dir / f".{spill_id}.{why}"
        (self._dir / f"{spill_id}.json").rename(aside)
        return aside

    def purge(self, before_ms: int) -> int:
        old = [self._dir / f"{spill_id}.json" for spill_id in self._ids() if spilled_at_ms(spill_id) < before_ms]
        # and those set aside, kept as long as a spill is
        old += [path for why in (_UNREADABLE, _REFUSED) for path in self._dir.glob(f".*.{why}")
                if is_spill_id(spill_id := path.name[1:-len(why) - 1]) and spilled_at_ms(spill_id) < before_ms]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)
