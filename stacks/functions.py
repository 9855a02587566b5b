"""How every Blackbox function is deployed: the shared code asset and dependency layer (and the
stack walker's layer for those that walk minidumps), in the VPC's private subnets, a log group with
retention, X-Ray, and the aws profile's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from aws_cdk import Duration, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from stacks import packaging
from stacks.config import DeployConfig
from stacks.nag import acknowledge

LAMBDA_BASIC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
LAMBDA_MSK = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaMSKExecutionRole"
LAMBDA_VPC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
# what CloudWatch keeps of every log the deployment makes: the functions', the CDK's helper
# functions' and MySQL's (a group with none keeps everything, paid for each month)
LOGS_KEPT = logs.RetentionDays.ONE_MONTH
# the functions that run the stack walker (adapters/stackwalk.py), which its layer puts on their PATH
WALKERS = frozenset({"minidump-processor"})
# a walk is single-threaded and CPU-bound, up to seconds: Lambda gives a whole vCPU from 1769 MB, and
# more memory would add a second one the walker does not use
WALKER_MEMORY_MB = 1769
# /tmp holds the S3 symbol store's copies (adapters.symbols.s3), a game's files tens of MB each,
# up to its CACHE_BYTES, the least recently asked for evicted first
WALKER_DISK_MB = 4096


@dataclass(frozen=True)
class Placement:
    """Where functions run and what every one of them is told."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup
    environment: Mapping[str, str]


def invoke_versions(function: lambda_.Function) -> str:
    """cdk-nag's finding for a grant to invoke any version of `function` (<arn>:*), as the CDK
    Provider framework gives itself."""
    logical_id = Stack.of(function).get_logical_id(function.node.default_child)  # type: ignore[arg-type]
    return f"Resource::<{logical_id}.Arn>:*"


def kept_logs(scope: Construct, construct_id: str, config: DeployConfig) -> logs.LogGroup:
    """A function's log group, kept LOGS_KEPT, and with the environment unless it is disposable."""
    return logs.LogGroup(scope, construct_id, retention=LOGS_KEPT,
                         removal_policy=config.removal_policy)


def provider(scope: Construct, construct_id: str, handler: lambda_.IFunction, config: DeployConfig) -> cr.Provider:
    """The CDK's custom-resource framework around `handler`, its own function's logs kept too."""
    return cr.Provider(scope, construct_id, on_event_handler=handler,
                       log_group=kept_logs(scope, f"{construct_id}Logs", config))


def topic_prefix(config: DeployConfig) -> str:
    return f"{config.prefix}."


def base_environment(config: DeployConfig, region: str) -> dict[str, str]:
    return {
        "BLACKBOX_PROFILE": "aws",
        "BLACKBOX_AWS_REGION": region,
        "BLACKBOX_KAFKA_TOPIC_PREFIX": topic_prefix(config),
        "BLACKBOX_LOG_PARTITIONS": str(config.topic_partitions),
        "BLACKBOX_RETENTION_DAYS": str(config.retention_days),
        # one service name: the metrics' dimension is the same from every function
        "POWERTOOLS_SERVICE_NAME": "blackbox",
        "POWERTOOLS_METRICS_NAMESPACE": "Blackbox",
        # one invocation in a hundred logs at DEBUG: a consumer's batch then names the API requests
        # that sent it (their correlation ids), without a line per record at every invocation
        "POWERTOOLS_LOGGER_SAMPLE_RATE": "0.01",
    }


class Functions(Construct):
    """A factory for the functions of one stack, sharing one layer version."""

    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, placement: Placement) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._placement = placement
        self._code = packaging.code()
        self._layer = lambda_.LayerVersion(
            self, "Dependencies", code=packaging.dependencies(), compatible_runtimes=[packaging.RUNTIME],
            compatible_architectures=[packaging.ARCHITECTURE],
            description=f"Blackbox's Python dependencies, {' / '.join(packaging.PLATFORMS)} wheels",
        )
        acknowledge(self, "AwsSolutions-L1", (
            "Python 3.12 on purpose: the oldest runtime on Amazon Linux 2023, closest to the 3.11 the tests run on; "
            "raise it with the project's Python"))
        acknowledge(self, "AwsSolutions-IAM4", (
            "AWSLambdaBasicExecutionRole and AWSLambdaVPCAccessExecutionRole are the documented minimum for a "
            "function in a VPC (logs, ENIs)"), [LAMBDA_BASIC, LAMBDA_VPC])
        acknowledge(self, "AwsSolutions-IAM4", (
            "AWSLambdaMSKExecutionRole is what an MSK event source mapping needs to describe the cluster and "
            "manage its network interfaces"), [LAMBDA_MSK])
        acknowledge(self, "AwsSolutions-IAM5", (
            "X-Ray's PutTraceSegments/PutTelemetryRecords take no resource"), ["Resource::*"])

    @cached_property
    def _walker(self) -> lambda_.LayerVersion:
        """Made with the first function of WALKERS: a stack without one bundles no walker."""
        return lambda_.LayerVersion(
            self, "Walker", code=packaging.walker(), compatible_architectures=[packaging.ARCHITECTURE],
            description="Blackbox's stack walker, bin/blackbox-stackwalk (stackwalk/), for arm64 and glibc 2.34",
        )

    def function(
        self, name: str, handler: str, *, timeout_s: int = 30, environment: Mapping[str, str] | None = None,
        memory_mb: int | None = None,
    ) -> lambda_.Function:
        config = self._config
        walks = name in WALKERS
        log_group = kept_logs(self, f"{name}-logs", config)
        return lambda_.Function(
            self, name,
            function_name=f"{config.prefix}-{name}",
            description=f"Blackbox {name} ({handler})",
            runtime=packaging.RUNTIME,
            architecture=packaging.ARCHITECTURE,
            handler=handler,
            code=self._code,
            layers=[self._layer, self._walker] if walks else [self._layer],
            memory_size=memory_mb or (max(config.lambda_memory_mb, WALKER_MEMORY_MB) if walks
                                      else config.lambda_memory_mb),
            timeout=Duration.seconds(timeout_s),
            ephemeral_storage_size=Size.mebibytes(WALKER_DISK_MB) if walks else None,
            vpc=self._placement.vpc,
            vpc_subnets=self._placement.subnets,
            security_groups=[self._placement.security_group],
            environment={**base_environment(config, Stack.of(self).region), **self._placement.environment,
                         **(environment or {})},
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
        )
