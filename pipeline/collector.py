"""How often the cyclic garbage collector runs in a process that consumes the log's batches."""

from __future__ import annotations

import gc

# new container objects before a young collection (CPython's default: 700)
YOUNG_OBJECTS = 10_000


def collect_for_batches() -> None:
    """A batch's parsed records, reads and deltas live until the batch is done. At CPython's 700,
    young collections run hundreds of times a batch and move what is alive then on, through the
    middle generation to the old, which grows by a quarter every few batches and is then walked
    whole, every object of the process: the ranking worker's full collections fell from 30 to 5 in
    200,000 updates, and its CPU an update by 3% to 30% (BENCHMARKS.md). Process-wide: each
    consumer function calls it as its module loads, once a Lambda environment or a serve's consumers
    worker (its periodic jobs too), and so does any process that loads one (`blackbox invoke`, the
    bench)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, old)
