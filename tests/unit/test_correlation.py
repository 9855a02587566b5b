"""A correlation id follows a report from the API request that sent it to the consumer's log: the
request's id is on every log line of the request (per thread, as the local gateway runs many at
once), on the record capture publishes, on a dead letter, and in a sampled consumer's batch line."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.factory import Adapters
from lambdas import capture, crash_consumer
from local_runtime.context import LocalContext
from pipeline.failures import land
from pipeline.msk import to_msk_event
from pipeline.topics import CRASHES, DEADLETTER
from ports import LogRecord
from ports.errors import StoreUnavailable
from ports.telemetry import correlated, instrumented, logger
from tests.conftest import load_event


class Lines(logging.Handler):
    """Log lines as Powertools writes them, formatted when written (its keys are per thread)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(logger.registered_formatter.format(record)))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler, level = Lines(), logger.log_level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)  # as a sampled invocation does
    yield handler
    logger.setLevel(level)
    logger.removeHandler(handler)


def test_a_report_carries_its_request_id_from_capture_to_the_consumers_log(adapters: Adapters, lines: Lines):
    event = load_event("capture-crash.json")
    event["requestContext"]["requestId"] = "req-7f3a"
    assert capture.handler(event, LocalContext("capture"))["statusCode"] == 202
    [record] = adapters.log.consumer("t", CRASHES).poll(10, 1 << 30, 0.1)
    assert dict(record.headers)["correlationId"] == b"req-7f3a"

    crash_consumer.handler(to_msk_event([record], "arn", "local"), LocalContext("crash-consumer"))
    [batch] = [line for line in lines.lines if line["message"] == "batch"]
    assert batch["correlationIds"] == ["req-7f3a"] and batch["records"] == 1


def test_each_thread_logs_its_own_request_id():
    handler = Lines()
    logger.addHandler(handler)
    both_in = threading.Barrier(2)

    def request(request_id: str) -> None:
        with correlated(request_id):
            both_in.wait()  # the other request's id is set meanwhile, in its own thread
            logger.info("handled", extra={"expected": request_id})

    threads = [threading.Thread(target=request, args=(f"req-{n}",)) for n in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        logger.removeHandler(handler)
    handled = [line for line in handler.lines if line["message"] == "handled"]
    assert len(handled) == 2 and all(line["correlation_id"] == line["expected"] for line in handled)
    with correlated("req-x"):
        pass
    assert "correlation_id" not in json.loads(logger.registered_formatter.format(
        logging.LogRecord("blackbox", logging.INFO, __file__, 0, "after", None, None)))


def test_a_dead_letter_keeps_what_it_came_with_and_its_log_line_names_the_request(adapters: Adapters, lines: Lines):
    record = LogRecord(CRASHES, 0, 4, b"{}", None, (("eventId", b"e-1"), ("correlationId", b"req-9")), 0)

    def refuse(_: object) -> None:
        raise ValueError("not a report")

    land([record], refuse, adapters.log)
    [dead] = adapters.log.consumer("t", DEADLETTER).poll(10, 1 << 30, 0.1)
    headers = dict(dead.headers)
    assert headers["eventId"] == b"e-1" and headers["correlationId"] == b"req-9"
    assert headers["reason"] == b"ValueError: not a report" and headers["sourceOffset"] == b"4"
    [aside] = [line for line in lines.lines if line["message"] == "record set aside"]
    assert aside["correlationIds"] == ["req-9"] and aside["reason"] == "ValueError: not a report"


def test_a_batch_retried_whole_names_its_requests(adapters: Adapters, lines: Lines):
    records = [LogRecord(CRASHES, 0, n, b"{}", None, (("correlationId", f"req-{n % 2}".encode()),), 0)
               for n in range(4)]

    def away(_: object) -> None:
        raise StoreUnavailable("index")

    with pytest.raises(StoreUnavailable):
        land(records, away, adapters.log)
    [retried] = [line for line in lines.lines if line["message"] == "batch not landed; it is tried again whole"]
    assert retried["correlationIds"] == ["req-0", "req-1"] and retried["records"] == 4


def test_each_threads_invocation_logs_its_own_function_and_a_line_outside_one_none(lines: Lines):
    """Found in serve's log: Powertools keeps a handler's Lambda context keys for the whole process,
    so under serve (functions side by side on threads) a crash consumer's line said ranking-worker,
    and a line logged between invocations the last one's name."""
    both_in = threading.Barrier(2)

    @instrumented
    def handler(event: dict[str, Any], context: Any) -> None:
        both_in.wait()  # the other invocation's context is set meanwhile, in its own thread
        logger.info("handled", extra={"expected": context.function_name})

    threads = [threading.Thread(target=handler, args=({}, LocalContext(name))) for name in ("crash-consumer", "purge")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logger.info("between")
    handled = [line for line in lines.lines if line["message"] == "handled"]
    assert len(handled) == 2 and all(line["function_name"] == line["expected"] for line in handled)
    [between] = [line for line in lines.lines if line["message"] == "between"]
    assert "function_name" not in between and "function_request_id" not in between
