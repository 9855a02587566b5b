"""Processing and ranking: the crash consumer, the session counter and the ranking worker, each on
an MSK event source mapping (batch size and window from the environment's config, retries, and
an S3 on-failure destination so a batch given up on is kept); the replay, which every few minutes
publishes again what capture spilled and those batches (docs/aws-durability.md); the daily
purge; and the webhooks' delivery, every minute, its missed runs kept in a dead-letter queue."""

from __future__ import annotations

import jsii
from aws_cdk import Aws, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from lambdas.functions import CONSUMERS
from stacks.access import ApplicationStack, Platform
from stacks.config import Consumer
from stacks.functions import topic_prefix
from stacks.nag import acknowledge

# a batch must finish inside the function timeout; the ranking worker's batches are the largest
TIMEOUT_S = 120
# the minidump processor's: a batch of `minidump_processor.batch_size` reports, each walked up to
# crashes.processing.WALKS times while a walk fetches symbols, each walk at most the walker's CPU
# budget (as long on the whole vCPU it is given), and the fetches; at the walker's bounds of wall
# time a report past the first is begun only with crashes.processing.BEGIN_WITH_S left, and the rest
# asked for again
WALKS_TIMEOUT_S = 420
# the purge deletes a day's worth of rows in chunks; the first run after a long pause has more
PURGE_TIMEOUT_S = 900
REPLAY_INTERVAL = Duration.minutes(5)
# a run ends before the next begins; EventBridge, which delivers at least once, may still start two at
# once: each passes over what the other took since its listing, and a record both publish is one event
REPLAY_TIMEOUT_S = 240
# an alert reaches its webhooks within about a minute; a run (at most webhooks.delivery.RUN_LIMIT
# deliveries) is done before the next begins
WEBHOOKS_INTERVAL = Duration.minutes(1)
WEBHOOKS_TIMEOUT_S = 55


@jsii.implements(lambda_.IEventSourceDlq)
class FailedBatches:
    """A mapping's S3 destination with the grants Lambda's docs ask for it (s3:PutObject on the
    objects, s3:ListBucket), where the CDK's S3OnFailureDestination grants read-write: a consumer
    that may read or delete the batches it gave up on could lose one."""

    def __init__(self, bucket: s3.IBucket) -> None:
        self._bucket = bucket

    def bind(self, target: lambda_.IEventSourceMapping,
             target_handler: lambda_.IFunction) -> lambda_.DlqDestinationConfig:
        target_handler.add_to_role_policy(iam.PolicyStatement(actions=["s3:PutObject"],
                                                              resources=[self._bucket.arn_for_objects("*")]))
        target_handler.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"],
                                                              resources=[self._bucket.bucket_arn]))
        return lambda_.DlqDestinationConfig(destination=self._bucket.bucket_arn)


class ProcessingStack(ApplicationStack):
    def __init__(self, scope: Construct, construct_id: str, platform: Platform, **kwargs: object) -> None:
        super().__init__(scope, construct_id, platform, **kwargs)
        config, streaming, data = platform.config, platform.streaming, platform.data
        settings: dict[str, Consumer] = {
            "crash-consumer": config.crash_consumer,
            "session-counter": config.session_counter,
            "ranking-worker": config.ranking_worker,
            "minidump-processor": config.minidump_processor,
        }
        failed = s3.Bucket.from_bucket_name(self, "FailedBatches", data.failed_batches_name)
        self.functions: dict[str, lambda_.Function] = {}
        for name, topic in CONSUMERS.items():
            group = f"{config.prefix}-{name}"
            function = self.adapter_function(name, timeout_s=WALKS_TIMEOUT_S if name == "minidump-processor"
                                             else TIMEOUT_S, group=group)
            consumer = settings[name]
            function.add_event_source(sources.ManagedKafkaEventSource(
                cluster_arn=streaming.cluster_arn,
                topic=topic_prefix(config) + topic,
                consumer_group_id=group,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=consumer.batch_size,
                max_batching_window=Duration.seconds(consumer.batching_window_s),
                retry_attempts=consumer.retries,
                # the retry count holds in provisioned mode only (docs/aws-durability.md)
                provisioned_poller_config=sources.ProvisionedPollerConfig(
                    minimum_pollers=consumer.min_pollers, maximum_pollers=consumer.max_pollers),
                on_failure=FailedBatches(failed),
            ))
            acknowledge(function, "AwsSolutions-IAM5", (
                "the failed-batch bucket's objects: the mapping writes one per batch given up on, named by Lambda"),
                [data.objects_finding(data.failed_batches_name, "*")])
            self.functions[name] = function
        self.replay = self._replay(data.failed_batches_name)
        self.purge = self.adapter_function("purge", timeout_s=PURGE_TIMEOUT_S)
        events.Rule(self, "DailyPurge", description="deletes what is past retention from every store",
                    schedule=events.Schedule.cron(minute="17", hour="3"),
                    targets=[targets.LambdaFunction(self.purge, retry_attempts=2)])
        self.webhooks = self._webhooks()

    def _replay(self, failed_batches: str) -> lambda_.Function:
        """The log and spill of its ports (read and delete on the spill prefix, publish to the
        topics), read and delete on the failed-batch bucket, and ReadData on the topics to read a
        batch back by offset should an object come without its records (pipeline.replay)."""
        data = self.platform.data
        replay = self.adapter_function("replay", timeout_s=REPLAY_TIMEOUT_S)
        replay.add_environment("BLACKBOX_FAILED_BATCHES_BUCKET", failed_batches)
        bucket = f"arn:{Aws.PARTITION}:s3:::{failed_batches}"
        replay.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket]))
        replay.add_to_role_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:DeleteObject"],
                                                      resources=[f"{bucket}/*"]))
        acknowledge(replay, "AwsSolutions-IAM5", (
            "the failed-batch bucket's objects: Lambda names them, the replay reads and deletes each one"),
            [data.objects_finding(failed_batches, "*")])
        # the next run is the retry: an asynchronous retry could run beside it
        replay.configure_async_invoke(retry_attempts=0)
        events.Rule(self, "Replay", description="publishes again what capture spilled and the failed batches",
                    schedule=events.Schedule.rate(REPLAY_INTERVAL),
                    targets=[targets.LambdaFunction(replay, retry_attempts=0)])
        return replay

    def _webhooks(self) -> lambda_.Function:
        """The outbox's delivery (webhooks.delivery): its ports alone. A run that fails is retried
        by the next (what is due stays due); a run EventBridge could not start lands in the
        dead-letter queue, where an alarm or a person sees it."""
        webhooks = self.adapter_function("webhooks", timeout_s=WEBHOOKS_TIMEOUT_S)
        webhooks.configure_async_invoke(retry_attempts=0)
        self.webhooks_dead_letters = sqs.Queue(self, "WebhooksDeadLetters", encryption=sqs.QueueEncryption.SQS_MANAGED,
                                               enforce_ssl=True, retention_period=Duration.days(14))
        acknowledge(self.webhooks_dead_letters, "AwsSolutions-SQS3",
                    "it is the dead-letter queue of the webhooks' schedule")
        events.Rule(self, "WebhookDelivery", description="sends the webhooks' due deliveries",
                    schedule=events.Schedule.rate(WEBHOOKS_INTERVAL),
                    targets=[targets.LambdaFunction(webhooks, retry_attempts=2,
                                                    dead_letter_queue=self.webhooks_dead_letters)])
        return webhooks
