"""Issue 16: a batch an MSK event source mapping gave up on after some of its partitions landed
goes to S3 whole; later batches move the partitions' offsets past it; the scheduled replay then
publishes all of it again. Events without an Idempotency-Key have no stored eventId, so only the
offsets each transaction covered tell the landed ones (skip) from the others (apply): every
session and every `incr` score counts exactly once, against the sum of all that was sent."""

from __future__ import annotations

import itertools
import json
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.factory import Adapters, build
from adapters.failed_batches import S3FailedBatches
from adapters.settings import Settings
from api.requests import Posted
from lambdas import capture
from pipeline.idempotency import retriable
from pipeline.replay import replay_failed_batches
from pipeline.topics import SCORES, SESSIONS
from ports import BoardSettings, LogRecord, OutgoingRecord
from ports.timeutil import MINUTE_MS, now_ms
from ranking.tree import DEFAULT_TREE
from ranking.worker import apply_scores
from sessions.counting import count_sessions
from sessions.model import SessionCount, SessionEnvelope
from tests.failed_batches import failed_batch, moto_bucket, put

TREE = DEFAULT_TREE
SKUS = ("a", "b", "c")
BOARDS = ("x", "y", "z")
PLAYERS = ("p", "q")
ROUNDS = 3  # the last round lands every batch, so what was given up is all counted in the end


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3FailedBatches]:
    with moto_bucket(monkeypatch) as store:
        yield store


class CutOff:
    """The bucket, with the replay cut off (its run ends) at the nth delete: the batches before it
    are published and gone, that one is published and stays, the rest wait."""

    def __init__(self, store: S3FailedBatches, at: int) -> None:
        self._store, self._left = store, at

    def keys(self) -> list[str]:
        return self._store.keys()

    def read(self, key: str) -> bytes:
        return self._store.read(key)

    def delete(self, key: str) -> None:
        self._left -= 1
        if self._left == 0:
            raise OSError("cut off")
        self._store.delete(key)


@dataclass(frozen=True)
class Consumer:
    topic: str
    group: str
    land: Callable[[Adapters, Sequence[LogRecord]], object]


CONSUMERS = (
    Consumer(SESSIONS, "blackbox-dev-session-counter", lambda a, records: count_sessions(records, a.counters, a.log)),
    Consumer(SCORES, "blackbox-dev-ranking-worker",
             lambda a, records: apply_scores(records, a.ranking, a.log, TREE)),
)

_GIVEN_UP = itertools.count()

sessions_sent = st.lists(st.tuples(st.sampled_from(SKUS), st.integers(1, 3)), min_size=1, max_size=12)
scores_sent = st.lists(st.tuples(st.sampled_from(BOARDS), st.sampled_from(PLAYERS), st.integers(1, 9)),
                       min_size=1, max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=sessions_sent, scores=scores_sent, data=st.data())
def test_a_replayed_failed_batch_counts_each_keyless_event_once(
    bucket: S3FailedBatches, sessions: list[tuple[str, int]], scores: list[tuple[str, str, int]], data: st.DataObject
) -> None:
    for key in bucket.keys():  # noqa: SIM118 (a store, not a dict)  left by an example that failed: hypothesis runs this one again
        bucket.delete(key)
    with tempfile.TemporaryDirectory() as data_dir:
        adapters = build(Settings(data_dir=Path(data_dir)))
        try:
            for board in BOARDS:
                adapters.ranking.put_board(BoardSettings(board, operator="incr"))
            adapters.log.publish(SESSIONS, [_keyless_sessions(i, sku, n) for i, (sku, n) in enumerate(sessions)])
            for board, player, score in scores:
                capture.scores(adapters.log, adapters.spill,
                               Posted(json.dumps({"board": board, "playerId": player, "score": score}).encode()))
            _consume_and_replay(adapters, bucket, data)

            until = now_ms() + MINUTE_MS
            counted = {sku: sum(adapters.counters.session_counts(sku, 0, until, until).values()) for sku in SKUS}
            expected_sessions = {sku: sum(n for s, n in sessions if s == sku) for sku in SKUS}
            assert counted == expected_sessions
            totals = {(b, p): adapters.ranking.scores(b, [p]).get(p, 0) for b in BOARDS for p in PLAYERS}
            expected_totals = {(b, p): sum(s for sb, sp, s in scores if (sb, sp) == (b, p))
                               for b in BOARDS for p in PLAYERS}
            assert totals == expected_totals
            assert bucket.keys() == []
        finally:
            adapters.close()


def _keyless_sessions(i: int, sku: str, n: int) -> OutgoingRecord:
    """What capture publishes for a request without an Idempotency-Key (a uuid4 eventId, which the
    consumers never store), with a fixed eventId, so the partition its key picks is the same each run."""
    event_id = str(uuid.UUID(int=i, version=4))
    assert not retriable(event_id)
    envelope = SessionEnvelope(eventId=event_id, receivedAt=now_ms(),
                               sessions=[SessionCount(sku=sku, kind="client")] * n)
    return OutgoingRecord(envelope.model_dump_json().encode(), event_id.encode())


def _consume_and_replay(adapters: Adapters, bucket: S3FailedBatches, data: st.DataObject) -> None:
    for consumer in CONSUMERS:
        # the event source mapping: commits what it was given, whether it landed or was given up
        log_consumer = adapters.log.consumer(consumer.group, consumer.topic)
        for round_ in range(ROUNDS):
            may_fail = round_ < ROUNDS - 1
            while batch := log_consumer.poll(data.draw(st.integers(1, 6), "batch size"), 1 << 30, 0.05):
                log_consumer.commit(batch)
                if may_fail and data.draw(st.booleans(), "given up"):
                    _land_some_then_give_up(adapters, bucket, consumer, batch, data)
                else:
                    consumer.land(adapters, batch)
            cut_at = data.draw(st.integers(0, len(bucket.keys())), "replay cut off at delete") if may_fail else 0
            if cut_at:
                with pytest.raises(OSError, match="cut off"):
                    replay_failed_batches(adapters.log, CutOff(bucket, cut_at), "")
            replay_failed_batches(adapters.log, bucket, "")
        log_consumer.close()


def _land_some_then_give_up(adapters: Adapters, bucket: S3FailedBatches, consumer: Consumer,
                            batch: list[LogRecord], data: st.DataObject) -> None:
    """What a failed invocation can leave: each partition's first records landed (a whole partition,
    a half before a timeout, none), then the retries spent, the whole batch in S3."""
    landed: list[LogRecord] = []
    for partition in sorted({r.partition for r in batch}):
        records = [r for r in batch if r.partition == partition]
        landed += records[:data.draw(st.integers(0, len(records)), f"landed of partition {partition}")]
    if landed:
        consumer.land(adapters, landed)
    # keys in the order given up: the bucket lists (and the replay publishes) in key order, and a
    # random key would make each run's batches, and so hypothesis's draws, different
    put(bucket, f"aws/lambda/esm/{next(_GIVEN_UP):012d}", failed_batch(batch, prefix=""))
