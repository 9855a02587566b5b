"""The load generator's arithmetic: bimodal sizes that average what was asked, and open-loop
arrival times that follow the profile."""

from __future__ import annotations

import json
import random

import pytest

from loadgen import payloads
from loadgen.profiles import PROFILES, arrivals


@pytest.mark.parametrize("average_kb", [10, 100, 200])
def test_crash_sizes_are_bimodal_and_average_what_was_asked(average_kb: int):
    rng = random.Random(7)
    sizes = [payloads.CrashSizes(average_kb * payloads.KB).draw(rng) for _ in range(20_000)]
    assert all(payloads.SMALL[0] <= s <= payloads.SMALL[1] or payloads.LARGE[0] <= s <= payloads.LARGE[1]
               for s in sizes)
    assert abs(sum(sizes) / len(sizes) / payloads.KB - average_kb) < average_kb * 0.05


@pytest.mark.parametrize("size", [300, 5 * 1024, 100 * 1024, 512 * 1024])
def test_a_crash_body_is_about_the_size_drawn(size: int):
    body = json.dumps(payloads.crash(random.Random(1), "g:pc", size)).encode()
    assert abs(len(body) - size) < 400


def test_spike_is_ten_times_the_base_in_the_middle_and_the_base_around_it():
    times = arrivals(PROFILES["spike"], 10, 100)
    per_second = [sum(1 for t in times if s <= t < s + 1) for s in range(100)]
    assert all(p == 10 for p in per_second[1:29] + per_second[71:99])
    assert all(p == 100 for p in per_second[31:69])


def test_steady_and_launch_rates():
    assert len(arrivals(PROFILES["steady"], 50, 10)) == 500
    launch = arrivals(PROFILES["launch"], 10, 100)
    early = sum(1 for t in launch if t < 10)
    late = sum(1 for t in launch if 90 <= t < 100)
    assert late == 500 and 130 < early < 150  # x5 at the end; from x1 to x1.8 in the first tenth
