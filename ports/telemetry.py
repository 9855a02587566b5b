"""What every layer reports through: the one Powertools logger, and CloudWatch metrics in embedded
metric format, a JSON line on stdout that CloudWatch Logs turns into a metric, so emitting costs no
API call. `blackbox serve` switches the metrics off (its log is for people); the dashboard and
alarms in AWS read them."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

logger = Logger(service="blackbox")

NAMESPACE = "Blackbox"
CRASH_SPIKE = "CrashSpike"
DEAD_LETTERS = "DeadLetters"
# objects the event source mappings put in the failed-batch bucket, as the scheduled replay finds them
FAILED_BATCHES = "FailedBatches"
# a consumer stopped: its stored offset belongs to another log (pipeline.offsets)
FOREIGN_OFFSET = "ForeignOffset"
# events capture put in the spill store because the log did not take them in time
SPILLED_EVENTS = "SpilledEvents"
VISIBILITY_LATENCY = "VisibilityLatency"


def emit(name: str, value: float, unit: MetricUnit = MetricUnit.Count, **metadata: str) -> None:
    if is_metrics_disabled():  # single_metric itself prints regardless
        return
    # one series per metric name (no per-sku dimension): one alarm covers every sku, and the
    # metadata still says which
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        for key, text in metadata.items():
            metric.add_metadata(key=key, value=text)
