"""Plays Lambda's Kafka event source mapping on one machine: polls a topic as a consumer group,
hands the handler the exact MSK event, and commits only after the handler returned. A batch the
handler failed (an engine away: what a value fails, the handler dead-letters itself, rule 8 of docs/architecture.md)
is rewound and retried with backoff, so data is delayed, never lost."""

from __future__ import annotations

import threading

from lambdas.functions import BATCH_RECORDS, CONSUMERS, Handler
from local_runtime.context import LocalContext
from pipeline.failures import reason
from pipeline.msk import to_msk_event
from ports import EventLog, LogConsumer
from ports.telemetry import logger

# Lambda's invocation payload limit is 6 MB; the batch (base64 grows it by 4/3) stays below it
MAX_BATCH_BYTES = 4 * 1024 * 1024
MAX_BACKOFF_S = 5.0


def consumer_group(function: str) -> str:
    """The Kafka consumer group (or the SQLite log's) of a consumer function under serve."""
    return f"blackbox-{function}"


# each consumed topic's reader under serve: the log's purge keeps what it has not committed
READERS = {topic: consumer_group(function) for function, topic in CONSUMERS.items()}


class Poller(threading.Thread):
    def __init__(self, log: EventLog, function: str, topic: str, handler: Handler, stop: threading.Event,
                 *, topic_prefix: str = "") -> None:
        super().__init__(name=f"poller-{function}", daemon=True)
        self._log = log
        # the event names topics as the cluster does (pipeline.msk): with the deployment's prefix
        self._prefix = topic_prefix
        self._function = function
        self._topic = topic
        self._handler = handler
        self._stop_event = stop
        self.batches = 0
        # whether its consumer's commits were all the group's when it closed (a stop says when not)
        self.committed = True

    def run(self) -> None:
        # made in the loop: a log away (Kafka restarting, its topic's creation timing out) is tried
        # again as a failed batch is, where a poller that gave up would leave its function unread
        consumer: LogConsumer | None = None
        arn = f"arn:aws:kafka:local:000000000000:cluster/blackbox/{self._topic}"
        backoff = 0.1
        # after a failure the consumer goes back to the last commit before it polls again; if even
        # that fails (the broker is restarting), it keeps trying: nothing is polled past a failed batch
        rewind = False
        try:
            while not self._stop_event.is_set():
                try:
                    if consumer is None:
                        consumer = self._log.consumer(group=consumer_group(self._function), topic=self._topic)
                    elif rewind:
                        consumer.rewind()
                    rewind = False
                    records = consumer.poll(BATCH_RECORDS[self._function], MAX_BATCH_BYTES, timeout_s=0.1)
                    if not records:
                        continue
                    event = to_msk_event(records, arn, "local", self._prefix)
                    self._handler(event, LocalContext(function_name=self._function))
                    consumer.commit(records)
                    self.batches += 1
                    backoff = 0.1
                except Exception as error:
                    # one line a backoff step: a traceback a retry buried everything else in the log
                    # with the engine's own words: a port's error says which store, not why (a deadlock)
                    cause = None if error.__cause__ is None else repr(error.__cause__)
                    logger.warning(f"batch failed; retrying in {backoff:.1f} s: {reason(error)}",
                                   extra={"function": self._function, "cause": cause})
                    rewind = consumer is not None
                    self._stop_event.wait(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
        finally:
            if consumer is not None:
                self.committed = consumer.close()
