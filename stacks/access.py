"""The stacks of functions built on the adapters (`adapters.factory.current()`): what each such
function is given, where the stores are and the least it needs on each."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from adapters.spill.s3 import PREFIX as SPILL_PREFIX
from local_runtime.functions import FUNCTIONS
from stacks.config import DeployConfig
from stacks.data import DataStack
from stacks.functions import Functions, Placement
from stacks.nag import acknowledge
from stacks.network import NetworkStack
from stacks.streaming import StreamingStack


@dataclass(frozen=True)
class Platform:
    """What the application stacks stand on."""

    config: DeployConfig
    network: NetworkStack
    streaming: StreamingStack
    data: DataStack


class ApplicationStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, platform: Platform, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.platform = platform
        network, streaming, data = platform.network, platform.streaming, platform.data
        self._functions = Functions(self, "Functions", platform.config, Placement(
            network.vpc, network.private, network.functions_sg,
            {"BLACKBOX_KAFKA_BOOTSTRAP": streaming.bootstrap, **data.store_environment()}))

    def adapter_function(self, name: str, *, timeout_s: int = 30, group: str | None = None) -> lambda_.Function:
        """The function `name` of local_runtime.functions.FUNCTIONS, with its grants."""
        function = self._functions.function(name, f"{FUNCTIONS[name]}.handler", timeout_s=timeout_s)
        grant_adapters(function, self.platform.streaming, self.platform.data, group=group)
        return function


def grant_adapters(function: lambda_.Function, streaming: StreamingStack, data: DataStack, *,
                   group: str | None = None) -> None:
    """Publish (capture, and consumers' dead letters) and describe topics; read both stores'
    credentials (the adapters are built together, once per container); the spill prefix. A
    consumer (`group`) also reads the topics and commits its group's offsets (its event source
    mapping)."""
    streaming.grant(function, ["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"], topics=True)
    if group is not None:
        streaming.grant(function, [
            "kafka-cluster:ReadData", "kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup",
        ], topics=True, groups=[group])
    data.mysql_secret.grant_read(function)
    data.couchbase_app.grant_read(function)
    # the spill store's four calls, on its prefix only
    bucket = f"arn:{Aws.PARTITION}:s3:::{data.spill_bucket_name}"
    function.add_to_role_policy(iam.PolicyStatement(
        actions=["s3:PutObject", "s3:GetObject", "s3:DeleteObject"], resources=[f"{bucket}/{SPILL_PREFIX}*"]))
    function.add_to_role_policy(iam.PolicyStatement(
        actions=["s3:ListBucket"], resources=[bucket], conditions={"StringLike": {"s3:prefix": [f"{SPILL_PREFIX}*"]}}))
    acknowledge(function, "AwsSolutions-IAM5", "the spill store's objects: any key under the spill/ prefix",
                [data.objects_finding(data.spill_bucket_name, f"{SPILL_PREFIX}*")])
