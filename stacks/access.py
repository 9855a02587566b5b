"""The stacks of functions built on the adapters (`adapters.factory.current()`): what each such
function is given, where the stores are and the least it needs on each."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from adapters.factory import Port
from adapters.spill.s3 import PREFIX as SPILL_PREFIX
from adapters.symbols.s3 import PREFIX as SYMBOLS_PREFIX
from lambdas.functions import FUNCTION_PORTS, FUNCTION_TOPICS, FUNCTIONS
from stacks.config import DeployConfig
from stacks.data import DataStack
from stacks.functions import Functions, Placement
from stacks.nag import acknowledge
from stacks.network import NetworkStack
from stacks.streaming import StreamingStack

# the functions that upload and delete symbol files; the processor only reads them
SYMBOL_WRITERS = frozenset({"symbols"})
# the ports on MySQL (RDS through RDS Proxy)
SQL_PORTS: frozenset[Port] = frozenset({"index", "counters", "ranking", "projects", "issues"})


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
        network = platform.network
        # no store for every function: each is told of the stores of its own ports (`wire`)
        self._functions = Functions(self, "Functions", platform.config, Placement(
            network.vpc, network.private, network.functions_sg, {}))

    def adapter_function(self, name: str, *, timeout_s: int = 30, group: str | None = None) -> lambda_.Function:
        """The function `name` of lambdas.functions.FUNCTIONS, wired to its ports."""
        function = self._functions.function(name, f"{FUNCTIONS[name]}.handler", timeout_s=timeout_s)
        wire(function, name, self.platform.streaming, self.platform.data)
        if group is not None:
            # its event source mapping reads its topics (wire) and commits its group's offsets
            self.platform.streaming.grant_group(function, group)
        return function


def wire(function: lambda_.Function, name: str, streaming: StreamingStack, data: DataStack) -> None:
    """Where the stores of the function `name`'s ports are, and the least on each: its own topics
    (lambdas.functions.FUNCTION_TOPICS), the MySQL or the Couchbase credentials, the spill and the
    symbols prefixes. Nothing for a port it does not use (FUNCTION_PORTS), so capture cannot read a
    database secret, and a consumer cannot publish to the topic it reads."""
    ports = FUNCTION_PORTS[name]
    environment: dict[str, str] = {}
    if "log" in ports:
        environment["BLACKBOX_KAFKA_BOOTSTRAP"] = streaming.bootstrap
        streaming.grant(function, FUNCTION_TOPICS[name])
    if ports & SQL_PORTS:
        environment |= data.mysql_environment()
        data.mysql_secret.grant_read(function)
    if "documents" in ports:
        environment |= data.couchbase_environment()
        data.couchbase_app.grant_read(function)
    if "spill" in ports:
        environment["BLACKBOX_SPILL_BUCKET"] = data.spill_bucket_name
        _grant_objects(function, data, data.spill_bucket_name, SPILL_PREFIX,
                       listing={"StringLike": {"s3:prefix": [f"{SPILL_PREFIX}*"]}})
    if "symbols" in ports:
        environment["BLACKBOX_SYMBOLS_BUCKET"] = data.symbols_bucket_name
        # the bucket, which holds symbol files alone, listed without a condition: S3 answers a get of a
        # missing key 404 only to a role that may list the bucket (403 else), and the walker asks for
        # missing files all the time
        _grant_objects(function, data, data.symbols_bucket_name, SYMBOLS_PREFIX, listing=None,
                       writes=name in SYMBOL_WRITERS)
    for key, value in environment.items():
        function.add_environment(key, value)


def _grant_objects(function: lambda_.Function, data: DataStack, bucket_name: str, prefix: str, *,
                   listing: dict[str, object] | None, writes: bool = True) -> None:
    """A store's calls on S3: get (and head), and unless it only reads, put and delete, under its
    prefix only; and list the bucket where the `listing` conditions hold."""
    bucket = f"arn:{Aws.PARTITION}:s3:::{bucket_name}"
    actions = ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"] if writes else ["s3:GetObject"]
    function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=[f"{bucket}/{prefix}*"]))
    function.add_to_role_policy(iam.PolicyStatement(
        actions=["s3:ListBucket"], resources=[bucket], conditions=listing))
    acknowledge(function, "AwsSolutions-IAM5",
                f"the {prefix.removesuffix('/')} store's objects: any key under the {prefix} prefix",
                [data.objects_finding(bucket_name, f"{prefix}*")])
