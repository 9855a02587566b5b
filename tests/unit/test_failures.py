"""The consumers' failure rule (rule 8 of docs/architecture.md): a record either lands or is dead-lettered alone with
its reason; an outage is retried whole, never dead-lettered."""

from __future__ import annotations

from collections.abc import Sequence

import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.factory import Adapters, build
from adapters.settings import Settings
from pipeline.failures import caused_by_value, land, reason
from pipeline.topics import DEADLETTER, SESSIONS, dead_letter, replay_dead_letters
from ports import LogRecord, OutgoingRecord
from ports.errors import StoreUnavailable, ValueRefused


def records(n: int) -> list[LogRecord]:
    return [LogRecord("sessions", 0, offset, str(offset).encode(), None, (), 0) for offset in range(n)]


def dead_letters(adapters: Adapters) -> list[LogRecord]:
    return adapters.log.consumer("t", DEADLETTER).poll(10_000, 1 << 30, timeout_s=0.1)


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_only_the_records_a_value_fails_are_dead_lettered_and_the_rest_land_in_order(tmp_path_factory, case):
    size, poison = case
    adapters = build(Settings(data_dir=tmp_path_factory.mktemp("d")))
    landed: list[int] = []

    def apply(part: Sequence[LogRecord]) -> int:
        if any(r.offset in poison for r in part):
            raise ValueRefused("DataError: (1406, \"Data too long for column 'error_code' at row 1\")")
        landed.extend(r.offset for r in part)  # the model: what a store that took it would hold
        return len(part)

    try:
        assert sum(land(records(size), apply, adapters.log)) == size - len(poison)
        assert landed == [n for n in range(size) if n not in poison]  # each once, in log order
        dead = dead_letters(adapters)
        assert sorted(int(d.value) for d in dead) == sorted(poison)  # once each
        assert all(dict(d.headers)["reason"].startswith(b"DataError: (1406") for d in dead)
    finally:
        adapters.close()


@pytest.mark.parametrize("error", [
    StoreUnavailable("index"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError("timed out"),
    RuntimeError("something we cannot tell"),
    # an engine's error that no adapter put in the ports' words: what it means cannot be told
    pymysql.err.DataError(1406, "Data too long"),
])
def test_an_outage_or_an_unknown_failure_is_raised_whole_and_nothing_is_dead_lettered(adapters: Adapters, error):
    def apply(part: Sequence[LogRecord]) -> None:
        raise error

    assert not caused_by_value(error)
    with pytest.raises(type(error)):
        land(records(8), apply, adapters.log)
    assert dead_letters(adapters) == []


@pytest.mark.parametrize("error", [
    ValueRefused("DataError: (1406, 'Data too long')"),
    OverflowError("Python int too large to convert to SQLite INTEGER"),
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
])
def test_value_failures_are_told_apart(error):
    assert caused_by_value(error)


def test_a_reason_is_one_bounded_line():
    assert reason(ValueError("first line\nsecond line")) == "ValueError: first line"
    assert reason(ValueRefused("DataError: (1406, 'too long')\nmore")) == "DataError: (1406, 'too long')"
    assert reason(ValueError()) == "ValueError"
    assert len(reason(ValueError("x" * 10_000))) == 500


def test_a_dead_letter_with_no_source_topic_does_not_stall_the_replay(adapters: Adapters):
    """The replay consumer keeps the failure rule too: it raised on such a record, every time."""
    adapters.log.publish(DEADLETTER, [OutgoingRecord(b"by hand", headers=(("sourceTopic", b"\xff"),))])
    dead_letter(adapters.log, [(LogRecord(SESSIONS, 0, 7, b"good", None, (), 0), "a bug since fixed")])
    assert replay_dead_letters(adapters.log, poll_timeout_s=0.1, join_timeout_s=0.1) == {SESSIONS: 1}
    assert [r.value for r in adapters.log.consumer("t", SESSIONS).poll(10, 1 << 20, 0.1)] == [b"good"]
