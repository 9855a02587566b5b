"""The network: a VPC whose private subnets hold every function, the brokers, the database and
Couchbase; the functions' and the brokers' security groups (the stores' are in the data stack,
next to what they guard); the endpoints the functions reach AWS APIs through."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.config import DeployConfig

KAFKA_IAM_PORT = 9098


class NetworkStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        # named zones, when given: their count needs no account to look them up
        zones = ({"availability_zones": config.availability_zones} if config.availability_zones
                 else {"max_azs": config.max_azs})
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            **zones,
            nat_gateways=config.nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            flow_logs={"all": ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                    logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=config.removal_policy)),
                traffic_type=ec2.FlowLogTrafficType.REJECT,
            )},
        )
        self.private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)

        def group(name: str, description: str) -> ec2.SecurityGroup:
            return ec2.SecurityGroup(self, name, vpc=self.vpc, description=description, allow_all_outbound=True)

        self.functions_sg = group("FunctionsSg", "Blackbox Lambda functions")
        self.kafka_sg = group("KafkaSg", "MSK Serverless: IAM-authenticated Kafka from the functions")
        self.endpoints_sg = group("EndpointsSg", "Interface endpoints: HTTPS from inside the VPC")

        # MSK event source mappings poll from the cluster's subnets with the cluster's security group
        self.kafka_sg.add_ingress_rule(self.functions_sg, ec2.Port.tcp(KAFKA_IAM_PORT), "functions to brokers")
        self.kafka_sg.add_ingress_rule(self.kafka_sg, ec2.Port.all_tcp(), "event source mappings to brokers")
        self.endpoints_sg.add_ingress_rule(ec2.Peer.ipv4(config.vpc_cidr), ec2.Port.tcp(443), "HTTPS")

        # S3 (spill) without NAT; Secrets Manager for credentials; STS and Lambda for the MSK
        # event source mappings, which need them reachable from the cluster's subnets
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        for name, service in (
            ("SecretsManager", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER),
            ("Sts", ec2.InterfaceVpcEndpointAwsService.STS),
            ("Lambda", ec2.InterfaceVpcEndpointAwsService.LAMBDA_),
        ):
            self.vpc.add_interface_endpoint(
                name, service=service, subnets=self.private, security_groups=[self.endpoints_sg],
                private_dns_enabled=True, open=False,  # the rule above admits the VPC
            )
