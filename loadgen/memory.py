"""The server's memory during a load run: the resident set of a process and all its descendants
(a serve's supervisor and its workers), sampled on a thread of its own."""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType

import psutil

WARM_UP_SHARE = 0.1
"""The part of a run before memory is expected to be flat: pools, caches and arenas filling."""
FLAT_WITHIN = 0.10


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and its descendants now; a process that ends meanwhile counts 0."""
    root = psutil.Process(pid)
    total = 0
    for process in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_info().rss
    return total


class MemoryWatch:
    """(seconds since the watch began, bytes) of the process tree of `pid`, every `interval_s`."""

    def __init__(self, pid: int, interval_s: float = 1.0) -> None:
        psutil.Process(pid)  # fails at once, not in the thread, if there is no such process
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="memory-watch", daemon=True)

    def _sample(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic() - started, tree_rss(self.pid)))
            except psutil.NoSuchProcess:
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


def flatness(samples: list[tuple[float, int]], duration_s: float) -> dict[str, float | bool]:
    """Memory after the warm-up against memory at its end: flat when no later sample is more than
    FLAT_WITHIN above it (growth is what a leak looks like; memory returned is not)."""
    warm_up_s = WARM_UP_SHARE * duration_s
    after = [rss for t, rss in samples if t >= warm_up_s]
    if not after:
        return {}
    at_warm_up, peak = after[0], max(after)
    return {"warmUpS": round(warm_up_s, 1), "atWarmUpMB": round(at_warm_up / 2**20, 1),
            "peakAfterMB": round(peak / 2**20, 1), "atEndMB": round(after[-1] / 2**20, 1),
            "growth": round(peak / at_warm_up - 1, 3), "flat": peak <= (1 + FLAT_WITHIN) * at_warm_up}
