from __future__ import annotations

import time

import pytest

from ports import Applied, Checkpoint, OffsetConflict, SessionBucket, SessionCounters, SkuSeen
from ports.timeutil import floor_to, now_ms

M = 60_000


def test_offsets_start_at_minus_one_and_move_with_the_counts(session_counters: SessionCounters):
    assert session_counters.applied("c", "sessions-0").offset == -1
    session_counters.apply(Checkpoint("c", "sessions-0", -1, 7, fingerprint="0123456789abcdef"),
                           {SessionBucket("g", 0, "client"): 3})
    assert session_counters.applied("c", "sessions-0") == Applied(7, "0123456789abcdef")
    assert session_counters.applied("c", "sessions-1").offset == -1
    assert session_counters.applied("other", "sessions-0").offset == -1


def test_counts_add_up_per_bucket(session_counters: SessionCounters):
    session_counters.apply(Checkpoint("c", "s-0", -1, 0),
                           {SessionBucket("g", 0, "client"): 3, SessionBucket("g", M, "server"): 1})
    session_counters.apply(Checkpoint("c", "s-0", 0, 1),
                           {SessionBucket("g", 0, "client"): 2, SessionBucket("h", 0, "client"): 9})
    assert session_counters.session_counts("g", 0, 2 * M, M) == {0: 5, M: 1}
    assert session_counters.session_counts("g", 0, 60 * M, 60 * M) == {0: 6}
    assert session_counters.session_counts("g", M, 2 * M, M) == {M: 1}


def test_skus_by_name_with_their_last_minute(session_counters: SessionCounters):
    assert session_counters.skus("", 10) == []
    session_counters.apply(Checkpoint("c", "s-0", -1, 0), {
        SessionBucket("g:pc", 3 * M, "client"): 1, SessionBucket("g:pc", 5 * M, "server"): 2,
        SessionBucket("a", M, "client"): 1, SessionBucket("z", 0, "server"): 4,
    })
    assert session_counters.skus("", 10) == [SkuSeen("a", M), SkuSeen("g:pc", 5 * M), SkuSeen("z", 0)]
    assert session_counters.skus("a", 1) == [SkuSeen("g:pc", 5 * M)]


def test_stale_expected_offset_changes_nothing(session_counters: SessionCounters):
    session_counters.apply(Checkpoint("c", "s-0", -1, 4, {"e1": None}), {SessionBucket("g", 0, "client"): 1})
    with pytest.raises(OffsetConflict):
        session_counters.apply(Checkpoint("c", "s-0", -1, 9, {"e2": None}), {SessionBucket("g", 0, "client"): 100})
    assert session_counters.applied("c", "s-0").offset == 4
    assert session_counters.session_counts("g", 0, M, M) == {0: 1}
    assert session_counters.seen_events("c", ["e1", "e2"]) == {"e1": None}


def test_applied_event_ids_are_remembered_per_consumer(session_counters: SessionCounters):
    assert session_counters.seen_events("c", []) == {}
    session_counters.apply(Checkpoint("c", "s-0", -1, 0, {"a": "1" * 64, "b": None}), {})
    # already there: harmless, and the first body hash stays (first write wins)
    session_counters.apply(Checkpoint("c", "s-1", -1, 0, {"a": "2" * 64}), {})
    assert session_counters.seen_events("c", ["a", "b", "x"]) == {"a": "1" * 64, "b": None}
    assert session_counters.seen_events("other", ["a"]) == {}


def test_purge_drops_older_minutes_and_applied_event_ids_only(session_counters: SessionCounters):
    now = now_ms()
    old, recent = floor_to(now - 10 * M, M), floor_to(now, M)
    session_counters.apply(Checkpoint("c", "s-0", -1, 0, {"early": None}),
                           {SessionBucket("g", old, "client"): 3, SessionBucket("g", recent, "client"): 2})
    time.sleep(0.01)
    cut = now_ms()
    time.sleep(0.01)
    session_counters.apply(Checkpoint("c", "s-0", 0, 1, {"late": None}), {SessionBucket("g", recent, "server"): 4})
    # the old minute's count and the eventId applied before the cut
    assert session_counters.purge(cut - 5 * M) == 1
    assert session_counters.session_counts("g", 0, now + M, M) == {recent: 6}
    assert session_counters.purge(cut) == 3  # the recent minute (client, server) began before `cut`; "early"
    assert session_counters.session_counts("g", 0, now + M, M) == {}
    assert session_counters.seen_events("c", ["early", "late"]) == {"late": None}
    assert session_counters.applied("c", "s-0").offset == 1  # offsets are state, not history


def test_the_offsets_each_checkpoint_covered_are_told_from_those_it_did_not(session_counters: SessionCounters):
    assert session_counters.covered("c", "s-0", [0, 1]) == set()
    session_counters.apply(Checkpoint("c", "s-0", -1, 3, first_offset=0), {})
    session_counters.apply(Checkpoint("c", "s-0", 3, 5, first_offset=4), {})
    # 6..8 were a batch given up: the next one lands 9..10; without first_offset, the last alone
    session_counters.apply(Checkpoint("c", "s-0", 5, 10, first_offset=9), {})
    session_counters.apply(Checkpoint("c", "s-0", 10, 12), {})
    assert session_counters.covered("c", "s-0", list(range(14))) == {0, 1, 2, 3, 4, 5, 9, 10, 12}
    assert session_counters.covered("c", "s-0", [7, 4]) == {4}
    assert session_counters.covered("c", "s-0", []) == set()
    assert session_counters.covered("c", "s-1", [0, 4]) == set()
    assert session_counters.covered("other", "s-0", [0, 4]) == set()


def test_a_checkpoint_refused_covers_nothing(session_counters: SessionCounters):
    session_counters.apply(Checkpoint("c", "s-0", -1, 1, first_offset=0), {})
    with pytest.raises(OffsetConflict):
        session_counters.apply(Checkpoint("c", "s-0", -1, 3, first_offset=2), {})
    assert session_counters.covered("c", "s-0", [0, 1, 2, 3]) == {0, 1}


def test_purge_drops_the_ranges_last_extended_before_it(session_counters: SessionCounters):
    session_counters.apply(Checkpoint("c", "s-0", -1, 1, first_offset=0), {})
    session_counters.apply(Checkpoint("c", "s-1", -1, 1, first_offset=0), {})
    time.sleep(0.01)
    cut = now_ms()
    time.sleep(0.01)
    session_counters.apply(Checkpoint("c", "s-1", 1, 3, first_offset=2), {})  # one range, 0..3, applied now
    assert session_counters.purge(cut) == 1
    assert session_counters.covered("c", "s-0", [0, 1]) == set()
    assert session_counters.covered("c", "s-1", [0, 1, 2, 3]) == {0, 1, 2, 3}
    assert session_counters.applied("c", "s-0").offset == 1
