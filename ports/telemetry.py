"""What every layer reports through: the one Powertools logger; CloudWatch metrics in embedded
metric format, a JSON line on stdout that CloudWatch Logs turns into a metric, so emitting costs no
API call; X-Ray traces through Powertools' tracer (none outside Lambda); and a correlation id, the
API request's id, which capture puts on what it publishes and the consumers log. `blackbox serve`
switches the metrics off (its log is for people); the dashboard and alarms in AWS read them."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

logger = Logger(service="blackbox")
# in Lambda it patches the engines' clients it knows (boto3, PyMySQL, httpx). Elsewhere, by
# Powertools' own rule, it would be switched off, and is not built: even off, building it loads the
# X-Ray SDK and a botocore session, 38 MB in each process of a serve. A handler's answer is not put
# in the trace: a page of reports is megabytes, a segment 64 KB at most
tracer = None if Tracer._is_tracer_disabled() else Tracer(service="blackbox")

CORRELATION_HEADER = "correlationId"
CORRELATION_KEY = "correlation_id"
_correlation: ContextVar[str | None] = ContextVar(CORRELATION_KEY, default=None)
# the Lambda context's keys, which Powertools keeps for the whole process from a handler's call
_INVOKED_KEYS = ("function_name", "function_memory_size", "function_arn", "function_request_id")
_invocation: ContextVar[Any] = ContextVar("invocation", default=None)

H = TypeVar("H", bound=Callable[..., Any])

NAMESPACE = "Blackbox"
# every handler's: a ColdStart count by function, and what it adds while it runs, in one line a call
metrics = Metrics(namespace=NAMESPACE, service="blackbox")
# a call that counted nothing publishes nothing: no news, not a warning
warnings.filterwarnings("ignore", message="No application metrics to publish", module="aws_lambda_powertools")
CRASH_SPIKE = "CrashSpike"
# an episode of a velocity or crash-free drop alert opened (crashes.alerts)
ALERT_OPENED = "AlertOpened"
DEAD_LETTERS = "DeadLetters"
# objects the event source mappings put in the failed-batch bucket, as the scheduled replay finds them
FAILED_BATCHES = "FailedBatches"
# a consumer stopped: its stored offset belongs to another log (pipeline.offsets)
FOREIGN_OFFSET = "ForeignOffset"
# minidumps walked, and those that could not be (unreadable, or the walker gave up on them)
MINIDUMPS_PROCESSED = "MinidumpsProcessed"
MINIDUMPS_FAILED = "MinidumpsFailed"
# events capture put in the spill store because the log did not take them in time
SPILLED_EVENTS = "SpilledEvents"
# spilled events the log refused (past a topic's record size): set aside by the replay, for a person
SPILLS_SET_ASIDE = "SpillsSetAside"
VISIBILITY_LATENCY = "VisibilityLatency"


def emit(name: str, value: float, unit: MetricUnit = MetricUnit.Count, **metadata: str) -> None:
    if is_metrics_disabled():  # single_metric itself prints regardless
        return
    # one series per metric name (no per-sku dimension): one alarm covers every sku, and the
    # metadata still says which
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        for key, text in metadata.items():
            metric.add_metadata(key=key, value=text)


def correlation_id() -> str | None:
    """The id of the API request being handled in this thread, if any."""
    return _correlation.get()


@contextmanager
def correlated(value: str | None) -> Iterator[None]:
    """Every log line written meanwhile in this thread carries `value`. Powertools' own correlation
    id is one for the whole process, and the local gateway handles requests on many threads."""
    token = _correlation.set(value)
    try:
        yield
    finally:
        _correlation.reset(token)


class _Correlation(logging.Filter):
    """Puts the id on a line when it is written, so a request that logs nothing pays nothing; and
    the Lambda context of the invocation the line's thread runs, none outside one: under serve the
    functions run side by side on threads, where Powertools' keys would name whichever ran last."""

    def filter(self, record: logging.LogRecord) -> bool:
        value = _correlation.get()
        if value is not None:
            setattr(record, CORRELATION_KEY, value)
        context = _invocation.get()
        # read when a line is written: an invocation that logs nothing pays for none of it
        invoked = {} if context is None else build_lambda_context_model(context).__dict__
        for key in _INVOKED_KEYS:
            setattr(record, key, invoked.get(key))
        return True


logger.addFilter(_Correlation())


def instrumented(handler: H) -> H:
    """A Lambda handler with Powertools' logger context, tracer and metrics; an API Gateway event's
    request id becomes the correlation id of what the handler logs and publishes."""

    @functools.wraps(handler)
    def correlating(event: dict[str, Any], context: Any) -> Any:
        request_id = (event.get("requestContext") or {}).get("requestId")
        token = _invocation.set(context)
        try:
            with correlated(request_id if isinstance(request_id, str) else None):
                return handler(event, context)
        finally:
            _invocation.reset(token)

    # decided once, as the tracer itself does: switched off, its wrapper still cost 10 µs a call;
    # so are the metrics (`blackbox serve` switches them off)
    traced = correlating if tracer is None else tracer.capture_lambda_handler(correlating, capture_response=False)
    measured = traced if is_metrics_disabled() else metrics.log_metrics(traced, capture_cold_start_metric=True)
    return cast(H, logger.inject_lambda_context(measured))
