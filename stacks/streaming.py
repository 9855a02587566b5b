"""The event log: MSK Serverless with IAM auth, its bootstrap brokers (not a CloudFormation
attribute: read through the Kafka API at deploy), and the topics, created by a custom resource
through the Kafka admin API."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from aws_cdk import CustomResource, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_msk as msk
from aws_cdk import custom_resources as cr
from constructs import Construct

from lambdas.functions import TopicAccess
from pipeline.topics import ALL_TOPICS, READ_GROUP, retention_days
from stacks.config import DeployConfig
from stacks.functions import LAMBDA_BASIC, Functions, Placement, invoke_versions, kept_logs, provider, topic_prefix
from stacks.nag import acknowledge
from stacks.network import NetworkStack

# MSK IAM actions (https://docs.aws.amazon.com/msk/latest/developerguide/kafka-actions.html)
CONNECT = ("kafka-cluster:Connect", "kafka-cluster:DescribeCluster")
# on the cluster: an idempotent producer's InitProducerId (Kafka's IDEMPOTENT_WRITE on the cluster)
WRITE_IDEMPOTENTLY = "kafka-cluster:WriteDataIdempotently"
WRITE = ("kafka-cluster:DescribeTopic", "kafka-cluster:WriteData")
READ = ("kafka-cluster:DescribeTopic", "kafka-cluster:ReadData")
GROUP = ("kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup")
PROVISION = ("kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic",
             "kafka-cluster:DescribeTopicDynamicConfiguration", "kafka-cluster:AlterTopicDynamicConfiguration")


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
            log_group=kept_logs(self, "BootstrapBrokersLogs", config),
        )
        self.bootstrap = brokers.get_response_field("BootstrapBrokerStringSaslIam")

        functions = Functions(self, "Functions", config, Placement(
            network.vpc, network.private, network.functions_sg, {"BLACKBOX_KAFKA_BOOTSTRAP": self.bootstrap}))
        create = functions.function("create-topics", "lambdas.provisioning.create_topics", timeout_s=300)
        # create the topics, and set the configuration of those that exist already
        self._connect(create, [])
        self._grant_topics(create, PROVISION, ALL_TOPICS)
        topics_provider = provider(self, "TopicsProvider", create, config)
        topics = CustomResource(self, "Topics", service_token=topics_provider.service_token, properties={
            "Partitions": str(config.topic_partitions),
            "RetentionDays": {topic_prefix(config) + t: str(retention_days(t, config.retention_days,
                                                                           config.log_retention_days))
                              for t in ALL_TOPICS},
        })
        topics.node.add_dependency(brokers)

        framework = "the CDK's own custom-resource framework functions"
        acknowledge(self, "AwsSolutions-IAM4", f"{framework} log with AWSLambdaBasicExecutionRole", [LAMBDA_BASIC])
        acknowledge(self, "AwsSolutions-L1", f"{framework} pick their runtime")
        acknowledge(topics_provider, "AwsSolutions-IAM5", f"{framework} may invoke their handler's versions",
                    [invoke_versions(create)])

    def arn(self, kind: str, name: str) -> str:
        """An ARN of this cluster's topics or groups: arn:...:<kind>/<cluster name>/<cluster uuid>/<name>."""
        parts = Fn.split("/", self.cluster_arn)
        return Stack.of(self).format_arn(
            service="kafka", resource=kind,
            resource_name=f"{Fn.select(1, parts)}/{Fn.select(2, parts)}/{name}",
        )

    def grant(self, grantee: iam.IGrantable, access: TopicAccess) -> None:
        """Connect to the cluster, publish to the topics `access` writes and read those it reads:
        exact ARNs, no wildcards. Publishing is idempotent (enable.idempotence), which MSK
        authorizes on the cluster: without WriteDataIdempotently every publish would be refused
        and every capture spilled."""
        self._connect(grantee, [WRITE_IDEMPOTENTLY] if access.writes else [])
        self._grant_topics(grantee, WRITE, access.writes)
        self._grant_topics(grantee, READ, access.reads)
        if access.reads:  # a read by offset names a group (adapters.kafka.log), found and never joined
            iam.Grant.add_to_principal(grantee=grantee, actions=["kafka-cluster:DescribeGroup"],
                                       resource_arns=[self.arn("group", topic_prefix(self.config) + READ_GROUP)])

    def grant_group(self, grantee: iam.IGrantable, group: str) -> None:
        """What an event source mapping needs besides reading its topics: its consumer group's
        offsets, and the cluster's configuration."""
        self._connect(grantee, ["kafka-cluster:DescribeClusterDynamicConfiguration"])
        iam.Grant.add_to_principal(grantee=grantee, actions=list(GROUP), resource_arns=[self.arn("group", group)])

    def _connect(self, grantee: iam.IGrantable, actions: Sequence[str]) -> None:
        iam.Grant.add_to_principal(grantee=grantee, actions=[*CONNECT, *actions], resource_arns=[self.cluster_arn])

    def _grant_topics(self, grantee: iam.IGrantable, actions: Sequence[str], topics: Collection[str]) -> None:
        if topics:
            iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=[
                self.arn("topic", topic_prefix(self.config) + topic) for topic in sorted(topics)])
