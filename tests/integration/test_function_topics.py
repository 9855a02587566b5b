"""FUNCTION_TOPICS against what the handlers do: each function, run on its sample events (and a
consumer on a record it must set aside), publishes to and reads only the topics its role is
granted in AWS (stacks/access.py); a topic missing from the table would be refused there."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded.log import SqliteEventLog
from adapters.factory import build, install
from adapters.settings import Settings
from lambdas.functions import CAPTURED, CONSUMERS, FUNCTION_TOPICS, load_handler
from local_runtime.context import LocalContext
from pipeline.msk import to_msk_event
from pipeline.topics import DEADLETTER
from ports import LogRecord
from tests.conftest import EVENTS, load_event

# the event log's calls by what they do to the topic named first
WRITING = ("publish", "purge")
READING = ("consumer", "read", "end_offsets")


def recording(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    touched: dict[str, set[str]] = defaultdict(set)
    for kind, methods in (("writes", WRITING), ("reads", READING)):
        for method in methods:
            original = getattr(SqliteEventLog, method)

            def spy(self: SqliteEventLog, *args: Any, _original: Callable[..., Any] = original, _kind: str = kind,
                    _method: str = method, **kwargs: Any) -> Any:
                # consumer(group, topic) names its topic second; purge takes a list of them
                topics = args[1] if _method == "consumer" else args[0]
                touched[_kind].update([topics] if isinstance(topics, str) else topics)
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(SqliteEventLog, method, spy)
    return touched


def malformed(topic: str) -> dict[str, Any]:
    record = LogRecord(topic=topic, partition=0, offset=0, value=b"{not json", key=None, headers=(),
                       timestamp_ms=1_700_000_000_000)
    return to_msk_event([record], "arn:aws:kafka:local:000000000000:cluster/blackbox/local", "127.0.0.1:9092")


@pytest.mark.parametrize("function", sorted(FUNCTION_TOPICS))
def test_a_function_touches_only_the_topics_its_role_allows(function: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    touched = recording(monkeypatch)
    adapters = build(Settings(data_dir=tmp_path))
    install(adapters)
    try:
        events = [load_event(sample.name) for sample in sorted(EVENTS.glob(f"{function}*.json"))]
        if function in CONSUMERS:
            events.append(malformed(CONSUMERS[function]))
        for event in events:
            load_handler(function)(event, LocalContext(function))
    finally:
        install(None)
        adapters.close()
    access = FUNCTION_TOPICS[function]
    assert touched["writes"] <= access.writes and touched["reads"] <= access.reads, dict(touched)
    # where the samples reach every write, the table grants no more than that
    if function == "capture":
        assert touched["writes"] == CAPTURED
    if function in CONSUMERS:
        assert touched["writes"] == {DEADLETTER}
