"""Publishes what capture spilled as soon as the log takes writes again, so data held back by an
outage arrives without anyone running `blackbox replay`."""

from __future__ import annotations

import threading

from adapters.ports import EventLog, SpillStore
from core.api import logger
from core.topics import replay_spilled

INTERVAL_S = 2.0


class SpillReplayer(threading.Thread):
    def __init__(self, log: EventLog, spill: SpillStore, stop: threading.Event, interval_s: float = INTERVAL_S) -> None:
        super().__init__(name="spill-replayer", daemon=True)
        self._log = log
        self._spill = spill
        self._stop_event = stop
        self._interval = interval_s

    def run(self) -> None:
        while not self._stop_event.wait(self._interval):
            try:
                replayed = replay_spilled(self._log, self._spill)
            except Exception as exc:  # the log is still away: what is left stays spilled
                logger.warning("spill replay failed; trying again", extra={"error": repr(exc)})
                continue
            if replayed:
                logger.info("replayed spilled events", extra={"events": replayed})
