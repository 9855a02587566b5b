"""The consumers' domain: idempotent persistence, effectively-once counting, dead letters."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.factory import Adapters
from api.requests import Posted
from crashes.model import ReportDocument, attachment_key
from crashes.persistence import persist_crashes
from crashes.spikes import Spike, SpikePolicy, announced
from lambdas import capture
from pipeline.idempotency import retriable
from pipeline.msk import from_msk_event
from pipeline.offsets import ForeignOffset
from pipeline.topics import DEADLETTER, MINIDUMPS
from ports import EventLog, IndexEntry, LogRecord, OutgoingRecord, ReportFilter
from ports.errors import StoreUnavailable
from ports.issues import Change
from ports.timeutil import now_ms
from sessions.capture import capture_counts
from sessions.counting import CONSUMER, count_sessions
from sessions.model import SessionCount, sessions_json
from tests.conftest import load_event

DUMPS = Path(__file__).parents[1] / "fixtures" / "minidumps"


def consume(adapters: Adapters, topic: str, group: str = "test") -> list[LogRecord]:
    return adapters.log.consumer(group, topic).poll(1000, 1 << 30, timeout_s=0.1)


def post_crash(adapters: Adapters, payload: dict, key: str | None = None) -> str:
    posted = Posted(json.dumps(payload).encode(), idempotency_key=key)
    return capture.crash(adapters.log, adapters.spill, posted).report_key


def persist(adapters: Adapters, records: list[LogRecord]) -> int:
    return len(persist_crashes(records, adapters.documents, adapters.index, adapters.log,
                               adapters.documents_ttl_seconds))


def test_a_redelivered_batch_changes_nothing(adapters: Adapters):
    for i in range(3):
        post_crash(adapters, {"sku": "g", "n": i})
    records = consume(adapters, "crashes")
    assert persist(adapters, records) == 3
    first = adapters.index.find(ReportFilter(sku="g", limit=10))
    persist(adapters, records)
    assert adapters.index.find(ReportFilter(sku="g", limit=10)) == first


def test_a_redelivered_batch_persists_nothing_new_and_announces_no_spike_again(adapters: Adapters):
    """Found from outside: reports sent without an Idempotency-Key came back from a redelivered
    batch as newly persisted, so the spike they had started was announced again."""
    for i in range(25):
        post_crash(adapters, {"sku": "g", "n": i})
    records = consume(adapters, "crashes")
    # two crashes a minute are a spike: the 25 may straddle a minute's end
    policy = SpikePolicy(factor=1.5, baseline_minutes=30, min_crashes=2)
    told = []
    for _ in range(2):
        persisted = persist_crashes(records, adapters.documents, adapters.index, adapters.log,
                                    adapters.documents_ttl_seconds)
        told.append((len(persisted), len(list(announced(adapters.index, adapters.issues, policy, persisted, 0)))))
    assert told[0][0] == 25 and told[0][1] >= 1
    assert told[1] == (0, 0)


class _MinidumpsFailOnce:
    """The log, but its first publish of walk requests fails, as after the index write."""

    def __init__(self, log: EventLog) -> None:
        self._log, self.failed = log, False

    def publish(self, topic: str, records: Sequence[OutgoingRecord]) -> None:
        if topic == MINIDUMPS and not self.failed:
            self.failed = True
            raise StoreUnavailable("the log did not answer; try again")
        self._log.publish(topic, records)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def test_a_spike_is_announced_once_when_its_batch_fails_after_the_index_write(adapters: Adapters):
    """Found in review: announced from what the batch returned, a spike was lost when the batch failed
    after its rows were written (its walk requests not published): delivered again, its reports
    were indexed already, and so no news."""
    dump = base64.b64encode((DUMPS / "patch.dmp").read_bytes()).decode()
    for i in range(25):
        post_crash(adapters, {"sku": "g", "n": i, "attachments": {"crash.dmp": dump}})
    records = consume(adapters, "crashes")
    policy = SpikePolicy(factor=1.5, baseline_minutes=30, min_crashes=2)
    told: list[Spike] = []

    def announce(indexed: list[IndexEntry]) -> None:
        told.extend(announced(adapters.index, adapters.issues, policy, indexed, 0))

    failing = _MinidumpsFailOnce(adapters.log)
    with pytest.raises(StoreUnavailable):
        persist_crashes(records, adapters.documents, adapters.index, failing, adapters.documents_ttl_seconds,  # type: ignore[arg-type]
                        on_indexed=announce)
    assert failing.failed and told
    before = list(told)
    assert persist_crashes(records, adapters.documents, adapters.index, adapters.log, adapters.documents_ttl_seconds,
                           on_indexed=announce) == []
    assert told == before
    assert len(consume(adapters, MINIDUMPS)) == 25  # the walks asked again


@pytest.mark.parametrize("fails_after_the_index", [False, True])
def test_a_redelivered_batch_counts_once_toward_an_ignore_for_a_number_of_reports(adapters: Adapters,
                                                                                   fails_after_the_index: bool):
    """Found in review: an issue ignored until 3 more reports ended at 2 when their batch came again
    (a member cut off after the index write, or the walks' publish failing): the consumer counted
    the group's reports before the batch's write, which a redelivery finds holding the batch."""
    trace = "#0 0x1 in Foo::bar()\n#1 0x2 in main"
    dump = base64.b64encode((DUMPS / "patch.dmp").read_bytes()).decode()
    taken: set[tuple[int, int]] = set()

    def sent(*payloads: dict[str, Any]) -> list[LogRecord]:
        for payload in payloads:
            post_crash(adapters, {"sku": "g", "stackTrace": trace, **payload})
        new = [r for r in consume(adapters, "crashes") if (r.partition, r.offset) not in taken]
        taken.update((r.partition, r.offset) for r in new)
        return new

    def persisted(records: list[LogRecord], log: EventLog) -> str:
        try:
            persist_crashes(records, adapters.documents, adapters.index, log, adapters.documents_ttl_seconds,
                            issues=adapters.issues)
        except StoreUnavailable:
            assert fails_after_the_index
        issue = adapters.issues.issue("g", signature)
        assert issue is not None
        return issue.state

    persist_crashes(sent({}), adapters.documents, adapters.index, adapters.log, adapters.documents_ttl_seconds,
                    issues=adapters.issues)
    [first] = adapters.index.find(ReportFilter(sku="g", limit=10))
    signature = first.entry.signature
    assert signature is not None
    # a millisecond before the reports that follow: one received in the same counts as before it
    adapters.issues.change("g", signature, Change("ignored", now_ms() - 1, "server", ignore_for=3))
    batch = sent(*({"n": i, "attachments": {"crash.dmp": dump}} for i in range(2)))
    log = _MinidumpsFailOnce(adapters.log) if fails_after_the_index else adapters.log
    assert [persisted(batch, log), persisted(batch, log)] == ["ignored", "ignored"]  # delivered twice
    assert persisted(sent({"n": 2}), adapters.log) == "ignored"
    assert persisted(sent({"n": 3}), adapters.log) == "unresolved"  # the first after 3 more


def test_a_client_retry_with_the_same_idempotency_key_is_one_report(adapters: Adapters):
    keys = {post_crash(adapters, {"sku": "g", "try": 1}, key="retry-1") for _ in range(3)}
    assert len(keys) == 1
    records = consume(adapters, "crashes")
    persist(adapters, records[:1])
    persist(adapters, records)
    assert len(adapters.index.find(ReportFilter(sku="g", limit=10))) == 1
    assert consume(adapters, DEADLETTER) == []


def full_payload(adapters: Adapters, key: str) -> dict:
    return ReportDocument.model_validate_json(adapters.documents.get_many([key])[key]).payload


def test_a_reused_key_with_another_body_never_rewrites_the_report(adapters: Adapters):
    """Finding 2 of issue 15: the document store held the second body, the index the first."""
    first = {"sku": "g", "crashType": "AV", "attachments": {"a.txt": "Zmlyc3Q="}}
    key = post_crash(adapters, first, key="reused")
    persist(adapters, consume(adapters, "crashes", group="one"))
    assert post_crash(adapters, {"sku": "g", "crashType": "OTHER", "attachments": {"a.txt": "b3RoZXI="}},
                      key="reused") == key
    post_crash(adapters, {"sku": "g", "crashType": "OTHER", "in": "the same batch"}, key="reused-2")
    post_crash(adapters, {"sku": "g", "crashType": "THIRD", "in": "the same batch"}, key="reused-2")
    persist(adapters, consume(adapters, "crashes", group="two"))
    assert full_payload(adapters, key) == {**first, "attachments": {"a.txt": None}}
    assert adapters.documents.get_many([attachment_key(key, "a.txt")]) == {attachment_key(key, "a.txt"): b"first"}
    reports = adapters.index.find(ReportFilter(sku="g", limit=10))
    assert [r.entry.crash_type for r in reports] == ["AV", "OTHER"]
    dead = consume(adapters, DEADLETTER)
    assert len(dead) == 2
    assert all(dict(d.headers)["reason"].startswith(b"idempotency_conflict") for d in dead)


def test_a_value_no_store_takes_is_dead_lettered_alone_and_the_partition_flows(adapters: Adapters):
    """Finding 1 of issue 15, on SQLite: a value beyond 64 bits stalled the batch forever."""
    for n in range(5):
        post_crash(adapters, {"sku": "g", "n": n})
    poison = b'{"eventId": "e", "reportKey": "%s", "receivedAt": %d, "sizeBytes": 2, "payload": {"sku": "g"}}' % (
        b"f" * 32, 2**63)
    adapters.log.publish("crashes", [OutgoingRecord(value=poison, key=b"f" * 32)])
    for n in range(5, 10):
        post_crash(adapters, {"sku": "g", "n": n})
    assert persist(adapters, consume(adapters, "crashes")) == 10
    assert len(adapters.index.find(ReportFilter(sku="g", limit=100))) == 10
    [dead] = consume(adapters, DEADLETTER)
    assert dead.value == poison
    assert dict(dead.headers)["reason"].startswith(b"OverflowError")


def test_attachments_are_stored_apart_from_the_body(adapters: Adapters):
    png = b"\x89PNG" + bytes(range(256)) * 40
    key = post_crash(adapters, {"sku": "g", "attachments": {"s.png": base64.b64encode(png).decode()}})
    persist(adapters, consume(adapters, "crashes"))
    found = adapters.documents.get_many([key, attachment_key(key, "s.png")])
    body = ReportDocument.model_validate_json(found[key])
    assert body.payload["attachments"] == {"s.png": None}
    assert len(found[key]) < 500
    assert found[attachment_key(key, "s.png")] == png
    [report] = adapters.index.find(ReportFilter(sku="g", limit=10))
    assert report.entry.attachments == ("s.png",)


def test_malformed_crash_records_go_to_the_dead_letter_topic_with_a_reason(adapters: Adapters):
    post_crash(adapters, {"sku": "g"})
    adapters.log.publish("crashes", [OutgoingRecord(value=b"not json", key=b"poison")])
    records = consume(adapters, "crashes")
    assert persist(adapters, records) == 1
    [dead] = consume(adapters, DEADLETTER)
    headers = dict(dead.headers)
    assert dead.value == b"not json"
    assert b"malformed crash record" in headers["reason"]
    assert headers["sourceTopic"] == b"crashes"


def sessions(adapters: Adapters, *batches: list[dict]) -> None:
    for batch in batches:
        capture.sessions(adapters.log, adapters.spill, Posted(json.dumps(batch).encode()))


def total(adapters: Adapters, sku: str = "g") -> int:
    return sum(adapters.counters.session_counts(sku, 0, 2**62, 2**61).values())


def test_sessions_count_once_even_when_batches_are_redelivered_or_overlap(adapters: Adapters):
    sessions(adapters, *[[{"sku": "g", "kind": "client"}] * 3 for _ in range(4)])
    records = consume(adapters, "sessions")
    assert count_sessions(records[:2], adapters.counters, adapters.log) == 6
    assert count_sessions(records[:2], adapters.counters, adapters.log) == 0  # redelivered
    assert count_sessions(records, adapters.counters, adapters.log) == 6  # overlaps: only the new ones
    assert total(adapters) == 12


def test_session_offsets_are_stored_per_partition(adapters: Adapters):
    sessions(adapters, *[[{"sku": "g", "kind": "server"}] for _ in range(20)])
    records = consume(adapters, "sessions")
    count_sessions(records, adapters.counters, adapters.log)
    for partition in {r.partition for r in records}:
        last = max(r.offset for r in records if r.partition == partition)
        assert adapters.counters.applied(CONSUMER, f"sessions-{partition}").offset == last
    assert total(adapters) == 20


def test_malformed_session_records_are_dead_lettered_and_the_rest_counted(adapters: Adapters):
    sessions(adapters, [{"sku": "g", "kind": "client"}])
    adapters.log.publish("sessions", [OutgoingRecord(value=b'{"eventId": 1}')])
    count_sessions(consume(adapters, "sessions"), adapters.counters, adapters.log)
    assert total(adapters) == 1
    assert [r.value for r in consume(adapters, DEADLETTER)] == [b'{"eventId": 1}']


def test_a_client_retry_of_sessions_with_the_same_idempotency_key_counts_once(adapters: Adapters):
    batch = json.dumps([{"sku": "g", "kind": "client"}] * 5).encode()
    for _ in range(3):  # each retry is a new log record, at a new offset
        capture.sessions(adapters.log, adapters.spill, Posted(batch, idempotency_key="k1"))
    capture.sessions(adapters.log, adapters.spill, Posted(batch, idempotency_key="k2"))
    records = consume(adapters, "sessions")
    assert len(records) == 4
    assert count_sessions(records[:2], adapters.counters, adapters.log) + \
        count_sessions(records, adapters.counters, adapters.log) == 10
    assert total(adapters) == 10


def test_a_session_key_is_scoped_by_sku(adapters: Adapters):
    """Finding 3 of issue 15: the same key for sessions of another sku answered 202 and counted 0."""
    capture.sessions(adapters.log, adapters.spill, Posted(json.dumps([{"sku": "g", "kind": "client"}] * 2).encode(),
                                                          idempotency_key="k"))
    body = json.dumps([{"sku": "h", "kind": "client"}] * 3 + [{"sku": "g", "kind": "client"}] * 2).encode()
    capture.sessions(adapters.log, adapters.spill, Posted(body, idempotency_key="k"))
    count_sessions(consume(adapters, "sessions"), adapters.counters, adapters.log)
    assert (total(adapters, "g"), total(adapters, "h")) == (2, 3)  # g's part of the second is a retry
    assert consume(adapters, DEADLETTER) == []


def test_a_reused_session_key_with_another_body_is_dead_lettered(adapters: Adapters):
    for kinds in (["client"], ["server", "server"], ["client"]):
        capture.sessions(adapters.log, adapters.spill,
                         Posted(json.dumps([{"sku": "g", "kind": k} for k in kinds]).encode(), idempotency_key="k"))
    records = consume(adapters, "sessions")
    count_sessions(records, adapters.counters, adapters.log)
    assert total(adapters) == 1
    [dead] = consume(adapters, DEADLETTER)
    assert dead.value == records[1].value
    assert dict(dead.headers)["reason"].startswith(b"idempotency_conflict")


def test_a_session_value_no_store_takes_is_dead_lettered_alone(adapters: Adapters):
    sessions(adapters, [{"sku": "g", "kind": "client"}])
    poison = b'{"eventId": "e", "receivedAt": %d, "sessions": [{"sku": "g", "kind": "client"}]}' % 2**64
    adapters.log.publish("sessions", [OutgoingRecord(value=poison)])
    sessions(adapters, [{"sku": "g", "kind": "server"}])
    records = consume(adapters, "sessions")
    count_sessions(records, adapters.counters, adapters.log)
    count_sessions(records, adapters.counters, adapters.log)  # redelivered: the offset is past the poison
    assert total(adapters) == 2
    assert [d.value for d in consume(adapters, DEADLETTER)] == [poison]


def test_an_offset_from_another_log_stops_the_counter_instead_of_skipping_events(adapters: Adapters):
    """Finding 10 of issue 15: the sample event of `blackbox invoke` run against live state stored
    its offsets, and the live counter then skipped every real session below them without a word."""
    sample = from_msk_event(load_event("session-counter.json"))
    count_sessions(sample, adapters.counters, adapters.log)
    sessions(adapters, *[[{"sku": "g", "kind": "client"}] for _ in range(40)])
    records = consume(adapters, "sessions")
    foreign = {r.partition for r in sample}
    assert any(r.partition in foreign for r in records)
    with pytest.raises(ForeignOffset, match="is not one of this log's"):
        count_sessions(records, adapters.counters, adapters.log)
    # the one with the foreign offset waits, nothing in it skipped; the other partitions flow
    own = [r for r in records if r.partition not in foreign]
    count_sessions(own, adapters.counters, adapters.log)
    assert total(adapters) == len(own)


def test_a_redelivery_is_checked_against_the_log_and_skipped(adapters: Adapters):
    sessions(adapters, *[[{"sku": "g", "kind": "client"}] for _ in range(8)])
    records = consume(adapters, "sessions")
    first = [r for r in records if r.partition == records[0].partition]
    count_sessions(first, adapters.counters, adapters.log)
    # a smaller redelivery, whose records end below the stored offset: its record is read from the log
    assert count_sessions(first[:1], adapters.counters, adapters.log) == 0
    assert count_sessions(records, adapters.counters, adapters.log) == 8 - len(first)
    assert total(adapters) == 8


def test_only_event_ids_from_an_idempotency_key_are_kept(adapters: Adapters):
    batch = json.dumps([{"sku": "g", "kind": "client"}]).encode()
    capture.sessions(adapters.log, adapters.spill, Posted(batch, idempotency_key="k"))
    capture.sessions(adapters.log, adapters.spill, Posted(batch))
    records = consume(adapters, "sessions")
    count_sessions(records, adapters.counters, adapters.log)
    ids = [json.loads(r.value)["eventId"] for r in records]
    [kept] = adapters.counters.seen_events(CONSUMER, ids)
    assert uuid.UUID(kept).version == 5  # the keyed one; the random one was not stored
    assert total(adapters) == 2


def test_retriable_is_exactly_uuid_version_5():
    assert retriable(str(uuid.uuid5(uuid.NAMESPACE_URL, "k")))
    assert not retriable(str(uuid.uuid4()))
    assert not retriable("5" * 36) and not retriable("")


def test_a_count_of_many_sessions_counts_them_all_once_and_a_count_of_one_is_written_as_before(
        adapters: Adapters):
    # a Sentry SDK's aggregate (reporters.capture): one record, many sessions
    many = [SessionCount(sku="g", kind="client", count=250)]
    for _ in range(2):  # the same upload twice
        capture_counts(adapters.log, adapters.spill, many, idempotency_key="aggregate-1")
    records = consume(adapters, "sessions")
    assert count_sessions(records, adapters.counters, adapters.log) == 250 and total(adapters) == 250
    # the body hash of single sessions is taken of the text releases before counts wrote
    assert sessions_json([SessionCount(sku="g", kind="client")]) == b'[{"sku":"g","kind":"client"}]'
