"""Thread pools a process keeps for the life of the process: made in the process that uses them (a
pool's threads do not survive a fork), and kept, as each thread keeps its store connection (the
adapters keep one a thread)."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor


def kept_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """This process's pool of that name."""
    return _pool(name, workers, os.getpid())


@functools.cache
def _pool(name: str, workers: int, process: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(workers, thread_name_prefix=f"{name}-{process}")
