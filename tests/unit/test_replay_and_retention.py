"""`blackbox replay` (spill and dead letters) and the retention purge, on the embedded adapters."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import pytest

from adapters.factory import Adapters
from api.requests import Posted
from cli.main import main
from crashes.persistence import persist_crashes
from lambdas import capture
from local_runtime.poller import READERS
from pipeline.topics import (
    DEADLETTER,
    REPLAY_GROUP,
    REPLAYED,
    SESSIONS,
    dead_letter,
    replay_dead_letters,
    replay_spilled,
)
from ports import LogRecord, OutgoingRecord, ReportFilter
from ports.timeutil import now_ms
from retention.purge import DAY_MS, purge
from sessions.counting import count_sessions
from sessions.model import SessionCount, SessionEnvelope
from tests.unit.test_persistence_and_counting import consume


def count(adapters: Adapters, group: str = "counter") -> int:
    return count_sessions(consume(adapters, SESSIONS, group), adapters.counters, adapters.log)


def sessions_counted(adapters: Adapters) -> int:
    return sum(adapters.counters.session_counts("g", 0, now_ms() + DAY_MS, DAY_MS).values())


def test_a_replay_cut_off_midway_is_still_counted_once(adapters: Adapters, monkeypatch: pytest.MonkeyPatch):
    """Events without an Idempotency-Key have random eventIds, which consumers do not look up; a
    replayed record is marked so that its eventId is looked up, so sending it twice counts once."""
    publish = adapters.log.publish
    monkeypatch.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
    capture.sessions(adapters.log, adapters.spill, Posted(json.dumps([{"sku": "g", "kind": "client"}] * 3).encode()))
    monkeypatch.setattr(adapters.log, "publish", publish)
    [spilled] = adapters.spill.list(10)
    monkeypatch.setattr(adapters.spill, "delete", lambda _: (_ for _ in ()).throw(OSError("cut off")))
    with pytest.raises(OSError, match="cut off"):
        replay_spilled(adapters.log, adapters.spill)  # published, but still spilled
    monkeypatch.undo()
    assert replay_spilled(adapters.log, adapters.spill) == 1
    records = consume(adapters, SESSIONS)
    assert len(records) == 2 and all(dict(r.headers)[REPLAYED] == f"spill:{spilled.spill_id}".encode()
                                     for r in records)
    assert count(adapters) == 3
    assert sessions_counted(adapters) == 3


def spilled_crashes(adapters: Adapters, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    with monkeypatch.context() as m:
        m.setattr(adapters.log, "publish", lambda *_: (_ for _ in ()).throw(TimeoutError("log away")))
        for n in range(count):
            capture.crash(adapters.log, adapters.spill, Posted(json.dumps({"sku": "g", "n": n}).encode()))


def test_a_replay_stops_at_its_first_failure_keeping_the_spills_order(adapters: Adapters,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """Not a try a spilled record, each waiting out the publish's timeout while the log is away (a
    board's scores apply in the order they were received)."""
    spilled_crashes(adapters, monkeypatch, 5)
    tries: list[str] = []

    def away(topic: str, records: list[OutgoingRecord]) -> None:
        tries.append(topic)
        raise TimeoutError("log away")

    monkeypatch.setattr(adapters.log, "publish", away)
    with pytest.raises(TimeoutError):
        replay_spilled(adapters.log, adapters.spill)
    assert len(tries) == 1 and len(adapters.spill.list(10)) == 5


def dead_letters(adapters: Adapters) -> list[LogRecord]:
    return consume(adapters, DEADLETTER, group="inspect")


def test_dead_letters_go_back_to_their_topic_once(adapters: Adapters, monkeypatch: pytest.MonkeyPatch):
    envelope = SessionEnvelope(eventId=str(uuid.uuid4()), receivedAt=now_ms(),
                               sessions=[SessionCount(sku="g", kind="server")])
    good = LogRecord(SESSIONS, 0, 41, envelope.model_dump_json().encode(), None, (), now_ms())
    # a consumer bug rejected a good record: it went to the dead letters, and then the poison did
    dead_letter(adapters.log, [(good, "rejected by a bug since fixed")])
    adapters.log.publish(SESSIONS, [OutgoingRecord(b"not json")])
    assert count(adapters) == 0
    assert Counter(r.value for r in dead_letters(adapters)) == {good.value: 1, b"not json": 1}

    real_commit = type(adapters.log.consumer(REPLAY_GROUP, DEADLETTER)).commit
    monkeypatch.setattr(type(adapters.log.consumer(REPLAY_GROUP, DEADLETTER)), "commit",
                        lambda *_: (_ for _ in ()).throw(OSError("cut off before its commit")))
    with pytest.raises(OSError):
        replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1)
    monkeypatch.setattr(type(adapters.log.consumer(REPLAY_GROUP, DEADLETTER)), "commit", real_commit)
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {SESSIONS: 2}
    assert count(adapters) == 1  # the good one, once though published twice; the poison is dead again
    assert sessions_counted(adapters) == 1
    assert Counter(r.value for r in dead_letters(adapters)) == {good.value: 1, b"not json": 3}
    # what was dead-lettered again after the replay started waits for the next one, which takes it
    # however soon it starts (no clock tick needed between the two: the cut is by offset)
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {SESSIONS: 2}
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {}


def test_a_dead_letter_from_the_millisecond_a_replay_starts_is_replayed_by_it(
    adapters: Adapters, monkeypatch: pytest.MonkeyPatch
):
    """The race of the test above, made certain: a clock that does not tick between the dead letter
    and the replay (a fast machine, or a record stamped by another host's clock)."""
    monkeypatch.setattr(time, "time_ns", lambda: 1_795_000_000_000 * 1_000_000)
    rejected = LogRecord(SESSIONS, 0, 7, b"not json", None, (), now_ms())
    dead_letter(adapters.log, [(rejected, "rejected by a bug since fixed")])
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {SESSIONS: 1}
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {}


def test_a_dead_letter_replay_ends_while_more_are_dead_lettered(adapters: Adapters):
    """Found in review: it ended only once no record at all came for its poll's timeout, so a
    consumer setting a record aside every second (a client sending a bad value, over and over) kept
    `blackbox replay --dead-letters` running for good, while it replayed none of them."""
    rejected = LogRecord(SESSIONS, 0, 7, b"not json", None, (), now_ms())
    dead_letter(adapters.log, [(rejected, "before the replay")] * 6)
    stop = threading.Event()

    def keep_rejecting() -> None:
        while not stop.wait(0.1):
            dead_letter(adapters.log, [(rejected, "while it runs")])

    rejecting = threading.Thread(target=keep_rejecting)
    rejecting.start()
    try:
        started = time.monotonic()
        assert replay_dead_letters(adapters.log, poll_timeout_s=2, join_timeout_s=2) == {SESSIONS: 6}
        assert time.monotonic() - started < 15
    finally:
        stop.set()
        rejecting.join()


def fill(adapters: Adapters) -> None:
    capture.crash(adapters.log, adapters.spill, Posted(b'{"sku": "g"}'))
    persist_crashes(consume(adapters, "crashes"), adapters.documents, adapters.index, adapters.log, 1)
    for _ in range(9):  # more records than the log has partitions
        capture.sessions(adapters.log, adapters.spill, Posted(b'{"sku": "g", "kind": "client", "x": "y"}'))
    count(adapters)
    adapters.spill.put(SESSIONS, OutgoingRecord(b"{}"))


def test_purge_deletes_from_every_store_what_is_past_retention(adapters: Adapters):
    fill(adapters)
    nothing = purge(adapters, now_ms())
    assert nothing.__dict__ == dict.fromkeys(nothing.__dict__, 0)
    assert sessions_counted(adapters) == 9
    # documents expire by their TTL (1 s here); the rest are past 90 days once 91 have gone by
    later = purge(adapters, now_ms() + 91 * DAY_MS)
    # the count's row, and the offsets covered of each partition the sessions went to
    partitions = sum(1 for end in adapters.log.end_offsets(SESSIONS).values() if end > 0)
    assert (later.reports, later.counter_rows, later.spilled) == (1, 1 + partitions, 1)
    assert later.log_records >= 1  # each partition keeps its newest record, for its offsets
    assert adapters.index.find(ReportFilter(sku="g", limit=10)) == []
    assert sessions_counted(adapters) == 0 and adapters.spill.list(10) == []


def test_dead_letters_are_kept_as_long_as_the_data_not_the_log(adapters: Adapters):
    """Found in review: the purge took them with the log's records, after 7 days where they wait
    90 for someone to read and replay them (pipeline.topics.retention_days)."""
    bad = LogRecord(SESSIONS, 0, 0, b"not json", None, (), now_ms())
    # more than the log has partitions, as each partition keeps its newest record
    dead_letter(adapters.log, [(bad, f"malformed {i}") for i in range(12)])
    assert purge(adapters, now_ms() + 8 * DAY_MS).log_records == 0
    assert len(adapters.log.consumer("reader", DEADLETTER).poll(100, 1 << 20, timeout_s=0)) == 12
    assert purge(adapters, now_ms() + 91 * DAY_MS).log_records >= 8


def test_serves_purge_keeps_the_events_its_consumers_have_not_committed(adapters: Adapters):
    """What the purge of serve and of `blackbox purge` keeps (local_runtime.poller.READERS): the
    session counter stopped before these, so a week later they are still there to count."""
    for _ in range(8):
        capture.sessions(adapters.log, adapters.spill, Posted(b'{"sku": "g", "kind": "client", "x": "y"}'))
    assert purge(adapters, now_ms() + 8 * DAY_MS, readers=READERS).log_records == 0
    reader = adapters.log.consumer(READERS[SESSIONS], SESSIONS)
    records = reader.poll(1000, 1 << 30, timeout_s=0.1)
    assert count_sessions(records, adapters.counters, adapters.log) == 8
    reader.commit(records)
    assert purge(adapters, now_ms() + 8 * DAY_MS, readers=READERS).log_records >= 4  # each partition keeps one


def test_blackbox_purge_and_replay_commands(adapters: Adapters, capsys: pytest.CaptureFixture[str]):
    data_dir = str(adapters.settings.data_dir)
    adapters.log.ping()  # a serve's data directory holds its log
    adapters.spill.put(SESSIONS, OutgoingRecord(b'{"eventId": "e", "receivedAt": 0, "sessions": []}'))
    assert main(["replay", "--dead-letters", "--data-dir", data_dir]) == 0
    assert main(["purge", "--data-dir", data_dir]) == 0
    out = capsys.readouterr().out
    assert "replayed 1 spilled event(s)" in out and "replayed 0 dead letter(s)" in out
    assert "reports: 0" in out
