"""Observability: one CloudWatch dashboard (capture rate, consumer offset lag, receive-to-queryable
latency, what was held back, errors) and alarms that notify an SNS topic, encrypted with a key of
the deployment's own: CloudWatch cannot use the AWS-managed SNS key, so alarms on a topic encrypted
with it are never delivered (docs/aws-durability.md)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from ports.telemetry import (
    CRASH_SPIKE,
    DEAD_LETTERS,
    FAILED_BATCHES,
    FOREIGN_OFFSET,
    NAMESPACE,
    SPILLED_EVENTS,
    SPILLS_SET_ASIDE,
    VISIBILITY_LATENCY,
)
from stacks.api import KEY_SOURCE, ApiStack
from stacks.config import DeployConfig
from stacks.processing import REPLAY_INTERVAL, WEBHOOKS_INTERVAL, ProcessingStack

PERIOD = Duration.minutes(1)
# the end-to-end targets (BENCHMARKS.md): p95 under 900 ms even inside a spike
LATENCY_P95_MS = 900
OFFSET_LAG = 100_000
# a scheduled function's errors, over periods that each hold one of its runs (the daily purge's, with
# its retries, the hour it starts in), and the failed runs in a row that alarm: a period of a minute
# would see a run every 5 minutes or a day fail, and never 3 minutes in a row
SCHEDULED = {"replay": (REPLAY_INTERVAL, 2), "webhooks": (WEBHOOKS_INTERVAL, 3), "purge": (Duration.hours(1), 1)}


def _blackbox(name: str, statistic: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace=NAMESPACE, metric_name=name, dimensions_map={"service": "blackbox"},
                             statistic=statistic, period=PERIOD)


def _offset_lag(function: lambda_.IFunction) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace="AWS/Lambda", metric_name="OffsetLag",
                             dimensions_map={"FunctionName": function.function_name}, statistic="Maximum",
                             period=PERIOD)


class ObservabilityStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, config: DeployConfig, api: ApiStack, processing: ProcessingStack,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.topic = self._alarm_topic(config)
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        consumers: Mapping[str, lambda_.IFunction] = processing.functions
        all_functions = {**api.functions, **processing.functions, "purge": processing.purge,
                         "replay": processing.replay, "webhooks": processing.webhooks}
        captured = api.api.metric_count(period=PERIOD, statistic="Sum", label="requests")
        latency = {p: _blackbox(VISIBILITY_LATENCY, p) for p in ("p50", "p95", "p99")}

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=config.prefix, widgets=[[
            cloudwatch.GraphWidget(title="Capture rate (requests/min)", left=[captured], width=8),
            cloudwatch.GraphWidget(title="Consumer offset lag", width=8,
                                   left=[_offset_lag(f).with_(label=name) for name, f in consumers.items()]),
            cloudwatch.GraphWidget(title="Receive to queryable (ms)", width=8,
                                   left=[m.with_(label=p) for p, m in latency.items()]),
        ], [
            cloudwatch.GraphWidget(title="Held back (spilled events, failed batches, dead letters)", width=8, left=[
                _blackbox(SPILLED_EVENTS, "Sum").with_(label="spilled events"),
                _blackbox(SPILLS_SET_ASIDE, "Sum").with_(label="spills set aside"),
                _blackbox(FAILED_BATCHES, "Sum").with_(label="failed batches"),
                _blackbox(DEAD_LETTERS, "Sum").with_(label="dead letters"),
            ]),
            cloudwatch.GraphWidget(title="Errors", width=8, left=[
                api.api.metric_server_error(period=PERIOD, label="API 5xx"),
                *[f.metric_errors(period=PERIOD, label=name) for name, f in all_functions.items()],
            ]),
            cloudwatch.GraphWidget(title="Crash spikes", width=8, left=[_blackbox(CRASH_SPIKE, "Sum")]),
        ]])

        CfnOutput(self, "DashboardName", value=config.prefix)
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn,
                  description="subscribe to get the alarms (or set alarm_email in cdk.json)")
        action = actions.SnsAction(self.topic)
        alarms: list[tuple[str, cloudwatch.Metric, float, int, str]] = [
            ("Api5xx", api.api.metric_server_error(period=PERIOD), 10, 3, "API answered 5xx"),
            ("NativeApi5xx", api.native_api.metric_server_error(period=PERIOD), 10, 3,
             "the Sentry SDKs' API answered 5xx (its key source failing among them)"),
            ("VisibilityP95", latency["p95"], LATENCY_P95_MS, 5, "reports take too long to become queryable"),
            ("DeadLetters", _blackbox(DEAD_LETTERS, "Sum"), 1, 1, "records went to the dead-letter topic"),
            ("SpilledEvents", _blackbox(SPILLED_EVENTS, "Sum"), 1, 1,
             "capture spilled events to S3: MSK did not take them in time (the replay publishes them)"),
            ("SpillsSetAside", _blackbox(SPILLS_SET_ASIDE, "Sum"), 1, 1,
             "MSK refuses a spilled event (past a topic's max.message.bytes): the replay set it aside under "
             "spill/refused/ in the spill bucket, for a person"),
            ("FailedBatches", _blackbox(FAILED_BATCHES, "Sum"), 1, 1,
             "a consumer gave a batch up to the failed-batch bucket; still on after the next replay: one "
             "cannot be published again (see the replay's log)"),
            ("ForeignOffset", _blackbox(FOREIGN_OFFSET, "Sum"), 1, 1,
             "a consumer stopped: its stored offset is not one of this log's"),
            ("CrashSpike", _blackbox(CRASH_SPIKE, "Sum"), 1, 1, "a sku's crashes spiked"),
            ("WebhooksDeadLetters", processing.webhooks_dead_letters.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Maximum"), 1, 1,
             "EventBridge could not start a webhooks run (its dead-letter queue holds the event)"),
        ]
        alarms += [(f"OffsetLag-{name}", _offset_lag(f), OFFSET_LAG, 5, f"{name} is falling behind")
                   for name, f in consumers.items()]
        # the key source refuses a request without a key by raising, as Lambda authorizers answer
        # 401, which Lambda counts an error: every scanner would page. Its failures are NativeApi5xx
        for name, f in all_functions.items():
            if name != KEY_SOURCE:
                period, runs = SCHEDULED.get(name, (PERIOD, 3))
                alarms.append((f"Errors-{name}", f.metric_errors(period=period), 1, runs, f"{name} fails"))
        self.alarms: list[cloudwatch.Alarm] = []
        for name, metric, threshold, periods, description in alarms:
            alarm = metric.create_alarm(
                self, name, alarm_name=f"{config.prefix}-{name}", alarm_description=description,
                threshold=threshold, evaluation_periods=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
            self.alarms.append(alarm)

    def _alarm_topic(self, config: DeployConfig) -> sns.Topic:
        """Encrypted with a key whose policy lets CloudWatch, on behalf of this account's alarms, use
        it; and a topic policy naming CloudWatch as a publisher (enforce_ssl replaces the default
        policy that would let it publish). As the SNS guide says, "Enable compatibility between
        event sources from AWS services and encrypted topics":
        https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services"""
        cloudwatch = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        this_account = {"aws:SourceAccount": Aws.ACCOUNT_ID}
        key = kms.Key(self, "AlarmsKey", description=f"{config.prefix}: encrypts the alarm topic",
                      enable_key_rotation=True,
                      removal_policy=config.removal_policy)
        key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublishToTheEncryptedTopic", principals=[cloudwatch],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            conditions={"StringEquals": this_account}))
        topic = sns.Topic(self, "Alarms", display_name="Blackbox alarms", enforce_ssl=True, master_key=key)
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisDeployment", principals=[cloudwatch], actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"StringEquals": this_account, "ArnLike": {"aws:SourceArn": self.format_arn(
                service="cloudwatch", resource="alarm", resource_name=f"{config.prefix}-*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME)}}))
        return topic
