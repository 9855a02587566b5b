"""The whole system: the stacks and their wiring, checked by cdk-nag's AwsSolutions pack."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.access import Platform
from stacks.api import ApiStack
from stacks.config import DeployConfig
from stacks.data import DataStack
from stacks.network import NetworkStack
from stacks.observability import ObservabilityStack
from stacks.processing import ProcessingStack
from stacks.streaming import StreamingStack


@dataclass(frozen=True)
class Blackbox:
    config: DeployConfig
    network: NetworkStack
    streaming: StreamingStack
    data: DataStack
    api: ApiStack
    processing: ProcessingStack
    observability: ObservabilityStack

    @property
    def stacks(self) -> list[cdk.Stack]:
        return [self.network, self.streaming, self.data, self.api, self.processing, self.observability]


def build(app: cdk.App) -> Blackbox:
    config = DeployConfig.from_context(app.node)
    env = cdk.Environment(account=config.account, region=config.region)
    name = config.prefix.title().replace("-", "")
    network = NetworkStack(app, f"{name}Network", config, env=env)
    streaming = StreamingStack(app, f"{name}Streaming", config, network, env=env)
    data = DataStack(app, f"{name}Data", config, network, env=env)
    platform = Platform(config, network, streaming, data)
    api = ApiStack(app, f"{name}Api", platform, env=env)
    processing = ProcessingStack(app, f"{name}Processing", platform, env=env)
    observability = ObservabilityStack(app, f"{name}Observability", config, api, processing, env=env)
    for stack in (network, streaming, data, api, processing, observability):
        # RDS Proxy target groups take no tags (CloudFormation rejects them)
        cdk.Tags.of(stack).add("project", "blackbox", exclude_resource_types=["AWS::RDS::DBProxyTargetGroup"])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return Blackbox(config, network, streaming, data, api, processing, observability)
