"""`blackbox replay --dead-letters` on Kafka waits for its consumer group: it says so in a line of
its own, then counts down, also where no terminal shows its spinner (a log, a pipe, CI)."""

from __future__ import annotations

import re

import pytest

from adapters.kafka.auth import plaintext
from adapters.kafka.log import KafkaEventLog
from cli.main import main
from pipeline.topics import SESSIONS, dead_letter
from ports import LogRecord
from ports.timeutil import now_ms
from tests.services import mysql_database, mysql_url, namespace, settings

pytestmark = pytest.mark.services  # on the engines of scripts/services


def test_replaying_dead_letters_on_kafka_says_what_it_waits_for_and_counts_down(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    name = namespace()
    monkeypatch.setenv("BLACKBOX_KAFKA_TOPIC_PREFIX", f"{name}.")
    monkeypatch.setenv("BLACKBOX_COUCHBASE_KEY_PREFIX", f"{name}:")
    # a line every tenth of a second: joining the group and reading the dead letter show several
    monkeypatch.setattr("cli.main.COUNTDOWN_EVERY_S", 0.1)
    log = KafkaEventLog(plaintext(settings().kafka_bootstrap), partitions=2, topic_prefix=f"{name}.")
    try:
        dead_letter(log, [(LogRecord(SESSIONS, 0, 7, b"not json", None, (), now_ms()), "a bug since fixed")])
    finally:
        log.close()
    monkeypatch.setenv("BLACKBOX_MYSQL_URL", mysql_url(name))
    with mysql_database(name):
        assert main(["replay", "--dead-letters", "--profile", "services"]) == 0
    shown = capsys.readouterr()
    assert shown.out.endswith("replayed 1 dead letter(s)\n  sessions: 1\n")
    first, *countdown = shown.err.splitlines()
    assert first == ("replaying dead letters (of 1 ever dead-lettered, those not replayed yet): waiting up to 10 s "
                     "for Kafka to assign the replay group its partitions, then until it read those there were "
                     "(or 2 s pass with none)")
    left = [int(re.fullmatch(r"replaying dead letters: waiting at most (\d+) s more", line)[1])  # type: ignore[index]
            for line in countdown]
    assert len(left) >= 2 and all(1 <= s <= 10 for s in left), shown.err
