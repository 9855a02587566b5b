"""`blackbox load --watch-pid`: the resident memory of a process tree through a run, and whether
it stayed flat after the warm-up."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from loadgen.memory import MemoryWatch, flatness, tree_pss

GROW = """
import sys, time
held = []
for _ in range(8):
    held.append(bytearray(8 << 20))  # 8 MiB more, touched, each step
    sys.stdout.write("+"); sys.stdout.flush()
    time.sleep(0.15)
time.sleep(30)
"""


def test_the_watch_sees_a_child_process_grow():
    # a parent whose child allocates: the watch adds the descendants to the process it was given
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys; subprocess.run([sys.executable, '-c', {GROW!r}])"],
                              stdout=subprocess.PIPE)
    try:
        with MemoryWatch(parent.pid, interval_s=0.05) as watch:
            assert parent.stdout is not None
            parent.stdout.read(8)  # every step taken
            time.sleep(0.2)
        first, last = watch.samples[0][1], watch.samples[-1][1]
        assert last - first >= 48 << 20
        assert sum(tree_pss(parent.pid).values()) >= last - (8 << 20)
        assert [t for t, _ in watch.samples] == sorted(t for t, _ in watch.samples)
        # and which process it was: the child, not the parent
        [child] = psutil.Process(parent.pid).children()
        grew = {pid: samples[-1][1] - samples[0][1] for pid, samples in watch.processes.items()}
        assert grew[child.pid] >= 48 << 20 and grew[parent.pid] < 8 << 20
        assert sum(samples[-1][1] for samples in watch.processes.values()) == last
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()


def test_flat_is_judged_after_the_warm_up_against_growth_only():
    mb = 2**20
    warm_up_then_level = [(t, (100 + min(t, 10) * 10) * mb) for t in range(100)]  # 100 → 200 MB in 10 s
    assert flatness(warm_up_then_level, 100)["flat"] is True
    shrinking = [(t, (200 - t) * mb) for t in range(100)]
    assert flatness(shrinking, 100)["flat"] is True
    leaking = [(t, (200 + t / 2) * mb) for t in range(100)]  # +42 MB on the level after the warm-up: 20%
    judged = flatness(leaking, 100)
    assert judged["flat"] is False and judged["levelMB"] == 207.2 and judged["peakAfterMB"] == 249.5
    just_within = [(t, (200 if t < 50 else 219) * mb) for t in range(100)]
    assert flatness(just_within, 100)["flat"] is True
    # one low reading at the end of the warm-up does not make the level: the median of a window does
    dip = [(t, (100 if t == 10 else 200) * mb) for t in range(100)]
    assert flatness(dip, 100)["flat"] is True and flatness(dip, 100)["levelMB"] == 200
    assert flatness([], 100) == {}
