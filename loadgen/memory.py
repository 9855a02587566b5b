"""The server's memory during a load run: the proportional set size (PSS: private pages, and a
share of each shared one) of a process and all its descendants (a serve's supervisor and its
workers), summed, sampled on a thread of its own. PSS sums without counting a shared library
once per process, as a sum of resident sets would."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from types import TracebackType

import psutil

WARM_UP_SHARE = 0.1
"""The part of a run before memory is expected to be flat: pools, caches and arenas filling."""
FLAT_WITHIN = 0.10


def tree_pss(pid: int) -> dict[int, int]:
    """Bytes of memory of `pid` and of each of its descendants now, by process id; a process that
    ends meanwhile is left out."""
    root = psutil.Process(pid)
    found = {}
    for process in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            found[process.pid] = process.memory_full_info().pss
    return found


class MemoryWatch:
    """(seconds since the watch began, bytes) of the process tree of `pid`, every `interval_s`: the
    sum in `samples`, each process's in `processes` (which one grew)."""

    def __init__(self, pid: int, interval_s: float = 1.0) -> None:
        psutil.Process(pid)  # fails at once, not in the thread, if there is no such process
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []
        self.processes: dict[int, list[tuple[float, int]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="memory-watch", daemon=True)

    def _sample(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            try:
                now, found = time.monotonic() - started, tree_pss(self.pid)
            except psutil.NoSuchProcess:
                return
            self.samples.append((now, sum(found.values())))
            for pid, pss in found.items():
                self.processes.setdefault(pid, []).append((now, pss))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


def flatness(samples: list[tuple[float, int]], duration_s: float) -> dict[str, float | bool]:
    """Memory after the warm-up against its level then (the median of the samples of a window as
    long as the warm-up, so that no one reading decides it): flat when no later sample is more
    than FLAT_WITHIN above that level. Growth is what a leak looks like; memory returned is not."""
    warm_up_s = WARM_UP_SHARE * duration_s
    after = [mb for t, mb in samples if t >= warm_up_s]
    window = [mb for t, mb in samples if warm_up_s <= t < 2 * warm_up_s] or after[:1]
    if not after:
        return {}
    level, peak = statistics.median(window), max(after)
    return {"warmUpS": round(warm_up_s, 1), "levelMB": round(level / 2**20, 1),
            "peakAfterMB": round(peak / 2**20, 1), "atEndMB": round(after[-1] / 2**20, 1),
            "growth": round(peak / level - 1, 3), "flat": peak <= (1 + FLAT_WITHIN) * level}
