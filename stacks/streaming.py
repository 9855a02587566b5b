"""The event log: MSK Serverless with IAM auth, its bootstrap brokers (not a CloudFormation
attribute: read through the Kafka API at deploy), and the topics, created by a custom resource
through the Kafka admin API."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CustomResource, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_msk as msk
from aws_cdk import custom_resources as cr
from constructs import Construct

from core.topics import ALL_TOPICS
from stacks.config import DeployConfig
from stacks.functions import LAMBDA_BASIC, Functions, Placement, invoke_versions, topic_prefix
from stacks.nag import acknowledge
from stacks.network import NetworkStack


class StreamingStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, config: DeployConfig, network: NetworkStack, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.config = config
        self.cluster = msk.CfnServerlessCluster(
            self, "Cluster",
            cluster_name=config.prefix,
            client_authentication=msk.CfnServerlessCluster.ClientAuthenticationProperty(
                sasl=msk.CfnServerlessCluster.SaslProperty(iam=msk.CfnServerlessCluster.IamProperty(enabled=True))),
            vpc_configs=[msk.CfnServerlessCluster.VpcConfigProperty(
                subnet_ids=network.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids,
                security_groups=[network.kafka_sg.security_group_id],
            )],
        )
        self.cluster_arn = self.cluster.attr_arn
        brokers = cr.AwsCustomResource(
            self, "BootstrapBrokers",
            on_update=cr.AwsSdkCall(
                service="Kafka", action="getBootstrapBrokers", parameters={"ClusterArn": self.cluster_arn},
                physical_resource_id=cr.PhysicalResourceId.of(self.cluster_arn),
                output_paths=["BootstrapBrokerStringSaslIam"],
            ),
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[self.cluster_arn]),
            install_latest_aws_sdk=False,
        )
        self.bootstrap = brokers.get_response_field("BootstrapBrokerStringSaslIam")

        functions = Functions(self, "Functions", config, Placement(
            network.vpc, network.private, network.functions_sg, {"BLACKBOX_KAFKA_BOOTSTRAP": self.bootstrap}))
        create = functions.function("create-topics", "lambdas.provisioning.create_topics", timeout_s=300)
        self.grant(create, ["kafka-cluster:CreateTopic", "kafka-cluster:DescribeTopic"], topics=True)
        provider = cr.Provider(self, "TopicsProvider", on_event_handler=create)
        topics = CustomResource(self, "Topics", service_token=provider.service_token, properties={
            "Partitions": str(config.topic_partitions), "Topics": [topic_prefix(config) + t for t in ALL_TOPICS],
        })
        topics.node.add_dependency(brokers)

        framework = "the CDK's own custom-resource framework functions"
        acknowledge(self, "AwsSolutions-IAM4", f"{framework} log with AWSLambdaBasicExecutionRole", [LAMBDA_BASIC])
        acknowledge(self, "AwsSolutions-L1", f"{framework} pick their runtime")
        acknowledge(provider, "AwsSolutions-IAM5", f"{framework} may invoke their handler's versions",
                    [invoke_versions(create)])

    def arn(self, kind: str, name: str) -> str:
        """An ARN of this cluster's topics or groups: arn:...:<kind>/<cluster name>/<cluster uuid>/<name>."""
        parts = Fn.split("/", self.cluster_arn)
        return Stack.of(self).format_arn(
            service="kafka", resource=kind,
            resource_name=f"{Fn.select(1, parts)}/{Fn.select(2, parts)}/{name}",
        )

    def grant(self, grantee: iam.IGrantable, actions: Sequence[str], *, topics: bool = False,
              groups: Sequence[str] = ()) -> None:
        """Connect to the cluster, plus `actions` on Blackbox's topics and/or the named consumer
        groups: exact ARNs, no wildcards."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["kafka-cluster:Connect", "kafka-cluster:DescribeCluster",
                                      "kafka-cluster:DescribeClusterDynamicConfiguration"],
            resource_arns=[self.cluster_arn],
        )
        resources = [self.arn("topic", topic_prefix(self.config) + t) for t in ALL_TOPICS] if topics else []
        resources += [self.arn("group", group) for group in groups]
        iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=resources)
