"""The ranking worker computes a batch's boards on two threads (ranking.worker._two_at_once): the
answers come in the boards' order, and a board that fails ends the batch only once the other
thread is done, neither starting another board: nothing of a failed batch runs on beside its retry
(found in review: with a pool's map the other boards went on after the failure was raised)."""

from __future__ import annotations

import threading
import time

import pytest

from ranking.worker import _two_at_once


def test_every_item_is_done_once_and_answered_in_order() -> None:
    threads: set[str] = set()

    def work(item: int) -> int:
        threads.add(threading.current_thread().name)
        time.sleep(0.001)  # the other thread takes items meanwhile
        return item * 2

    assert _two_at_once(work, list(range(40))) == [item * 2 for item in range(40)]
    assert len(threads) == 2
    assert _two_at_once(work, []) == []


def test_a_failure_stops_both_threads_and_is_raised_once_the_other_is_done() -> None:
    started: list[int] = []
    second_running = threading.Event()
    finished: list[int] = []

    def work(item: int) -> int:
        started.append(item)
        if item == 0:
            assert second_running.wait(5)
            raise RuntimeError("the store went away")
        if item == 1:
            second_running.set()
            time.sleep(0.2)
            finished.append(item)
        return item

    with pytest.raises(RuntimeError, match="went away"):
        _two_at_once(work, list(range(10)))
    assert finished == [1]  # not returned while the other thread was still at work
    assert sorted(started) == [0, 1]  # and neither took another item after the failure
