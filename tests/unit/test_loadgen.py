"""The load generator's arithmetic: bimodal sizes that average what was asked, and open-loop
arrival times that follow the profile."""

from __future__ import annotations

import gc
import json
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen import payloads
from loadgen.profiles import PROFILES, arrivals
from loadgen.run import FREEZE_EVERY, LoadConfig, LoadReport, Outcome, Tally, Verification, _progress


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


class TailOnly(list[Outcome]):
    """Outcomes that may be counted and sliced, not walked whole."""

    def __iter__(self) -> Iterator[Outcome]:
        raise AssertionError("the live display walked every outcome of the run")


@settings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from([202, 503, 429, "ClientConnectorError"]),
                          st.lists(st.floats(0, 1000), max_size=3)), max_size=3000))
def test_the_live_display_reads_the_recent_outcomes_and_running_counts(drawn: list[tuple[int | str, list[float]]]):
    """It is redrawn twice a second for the whole run: walking every outcome each time stalled the
    event loop that times the requests, so the p99 of a 30-minute soak grew from 16 to 280 ms."""
    tally = Tally(TailOnly())
    for status, shed in drawn:
        tally.add(Outcome("sessions", 0.0, status, 5.0, shed_ms=tuple(shed)))
    assert tally.statuses == Counter(str(status) for status, _ in drawn)
    assert tally.shed == sum(len(shed) for _, shed in drawn)
    config = LoadConfig(url="http://127.0.0.1:1", profile="steady", rate=100.0, duration_s=60.0)
    table = _progress(config, tally, time.perf_counter())
    cells = dict(zip(table.columns[0].cells, table.columns[1].cells, strict=True))
    assert cells["answered"] == str(len(drawn))
    assert cells["statuses"] == ", ".join(f"{k}: {n}" for k, n in Counter(str(s) for s, _ in drawn).items())


def test_what_the_run_keeps_leaves_the_collectors_view_until_it_is_released():
    """A full collection walks every tracked object: over a 10-minute soak's outcomes it took
    250 ms, and the p99 of each 10 s window jumped every couple of minutes, more each time."""
    tally = Tally()
    try:
        for n in range(FREEZE_EVERY + 10):
            tally.add(Outcome("sessions", 0.0, 202, 5.0, {"accepted": 1, "n": n}))
        walked = {id(o) for o in gc.get_objects()}
        assert id(tally.outcomes[0]) not in walked and id(tally.outcomes[FREEZE_EVERY - 1].answer) not in walked
        assert id(tally.outcomes[-1]) in walked  # what came since waits for the next batch
    finally:
        tally.release()
    assert id(tally.outcomes[0]) in {id(o) for o in gc.get_objects()}


def test_memory_is_judged_on_the_load_and_the_check_after_it_reported_apart():
    """The check reads every report back: a 30-minute soak's API worker grew 33 MB in those last
    seconds, which is not growth under sustained load."""
    mb = 2**20
    config = LoadConfig(url="http://127.0.0.1:1", duration_s=100.0)
    during = [(float(t), 100 * mb) for t in range(101)]
    after = [(101.0, 150 * mb), (102.0, 140 * mb)]
    report = LoadReport(config, "r", 0, 100.0, [], Verification(), 0, during + after,
                        {7: [(t, b // 2) for t, b in during + after]})
    memory = report.as_json()["serverMemory"]
    assert memory["flat"] is True and memory["peakAfterMB"] == 100 and memory["checkPeakMB"] == 150
    assert memory["byProcess"]["7"]["flat"] is True and memory["byProcess"]["7"]["peakAfterMB"] == 50
