"""Dead-letter replay on a real Kafka broker: the replay's consumer group has to join before it
gets anything, and what it sends back keeps the record's key (so its partition) and is marked."""

from __future__ import annotations

import pytest

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from pipeline.topics import REPLAYED, SCORES, dead_letter, replay_dead_letters
from ports import LogRecord
from ports.timeutil import now_ms
from tests.contract.test_event_log import drain
from tests.services import namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


def test_dead_letters_are_replayed_to_their_topic_once():
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=2, topic_prefix=f"{namespace()}.")
    try:
        rejected = [LogRecord(SCORES, 1, n, f"score {n}".encode(), b"board-1", (), now_ms()) for n in range(3)]
        dead_letter(log, [(r, "a bug since fixed") for r in rejected])
        assert replay_dead_letters(log, poll_timeout_s=1.0) == {SCORES: 3}
        assert replay_dead_letters(log, poll_timeout_s=1.0) == {}
        replayed = drain(log.consumer("check", SCORES), 3)
        assert [r.value for r in replayed] == [b"score 0", b"score 1", b"score 2"]
        assert all(r.key == b"board-1" and dict(r.headers)[REPLAYED].startswith(b"deadletter:") for r in replayed)
        assert not any(name == "reason" for r in replayed for name, _ in r.headers)
    finally:
        log.close()
