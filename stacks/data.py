"""The stores: RDS MySQL behind RDS Proxy (credentials in Secrets Manager, rotated by Secrets
Manager's hosted rotation, migrations applied on deploy by a custom resource), a Couchbase Server
cluster on EC2 (one node per private subnet, each named in a private DNS zone, backed up daily to
S3), and the S3 buckets for spill and archives, and for symbol files."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import (
    Aws,
    CfnCreationPolicy,
    CfnResource,
    CfnResourceSignal,
    CustomResource,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from adapters.mysql.database import CODE_MIGRATIONS
from adapters.mysql.database import MIGRATIONS as MYSQL_MIGRATIONS
from adapters.sql.migrations import index_migrations
from stacks.config import BUCKET_PURPOSES, DeployConfig
from stacks.functions import LAMBDA_BASIC, LOGS_KEPT, Functions, Placement, invoke_versions, kept_logs, provider
from stacks.nag import acknowledge
from stacks.network import NetworkStack

SSM_CORE = "Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore"
MYSQL_PORT = 3306
# the CDK's log-retention function's construct id, after "LogRetention" (a singleton a stack)
LOG_RETENTION_ID = "aae0aa3c5b4d4f87b02d85b201efdd8a"
# Couchbase: REST/admin and the query/KV service ports the SDK and the nodes use
COUCHBASE_PORTS = ((8091, 8097), (9123, 9123), (11207, 11207), (11210, 11210), (18091, 18097))
COUCHBASE_NODE_PORTS = ((4369, 4369), (9100, 9105), (9110, 9118), (9120, 9122), (9130, 9130), (9999, 9999),
                        (11209, 11210), (21100, 21100))
USER_DATA = Path(__file__).resolve().parent / "couchbase" / "user-data.sh"
DATA_DEVICE = "/dev/sdf"  # the nodes' data volume; Amazon Linux links its NVMe device to this name
BACKUP_PREFIX = "couchbase/"
# how often the MySQL password changes; the functions pick the new one up on their next connection
MYSQL_ROTATION = Duration.days(30)
# how often the Couchbase application user's password changes; alternating users, so a function that
# read the last one signs in with it until the rotation after
COUCHBASE_ROTATION = Duration.days(30)
DATABASE = "blackbox"
BUCKET = "blackbox"


def _credentials(scope: Construct, name: str, username: str, removal: RemovalPolicy) -> secretsmanager.Secret:
    # kept as the data they sign in to is (removal=retain)
    return secretsmanager.Secret(
        scope, name,
        description=f"Blackbox Couchbase {username}", removal_policy=removal,
        generate_secret_string=secretsmanager.SecretStringGenerator(
            secret_string_template=f'{{"username": "{username}"}}', generate_string_key="password",
            exclude_punctuation=True, password_length=32,
        ),
    )


class DataStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, config: DeployConfig, network: NetworkStack, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self._config = config
        self._security_groups(network)
        self._mysql(config, network)
        self._bucket(config)
        self._couchbase(config, network)
        self._migrations(config, network)
        self._couchbase_rotation(config, network)
        acknowledge(self.couchbase_admin, "AwsSolutions-SMG4", (
            "the cluster administrator's password is read by the nodes' bootstrap and backups, not by the "
            "functions; rotate it by hand (docs/aws.md). The application user's secret rotates every 30 days"))
        acknowledge(self.database, "AwsSolutions-RDS11", (
            "the default MySQL port: only the RDS Proxy's security group reaches it"))
        acknowledge(self, "AwsSolutions-IAM4", (
            "AWS-managed policies: SSM Session Manager for the Couchbase nodes (no SSH keys, no port 22), and the "
            "CDK custom-resource framework's logging"), [SSM_CORE, LAMBDA_BASIC])
        acknowledge(self, "AwsSolutions-L1", "the CDK's own custom-resource framework functions pick their runtime")
        acknowledge(self.database, "AwsSolutions-IAM4", (
            "AmazonRDSEnhancedMonitoringRole is the documented role for RDS Enhanced Monitoring"),
            ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"])
        if config.removal == "destroy":
            disposable = f"the {config.prefix} environment is disposable (removal=destroy in cdk.json)"
            acknowledge(self.database, "AwsSolutions-RDS10", f"no deletion protection: {disposable}")
            acknowledge(self, "AwsSolutions-EC29", f"no termination protection: {disposable}")
        if not config.mysql_multi_az:
            acknowledge(self.database, "AwsSolutions-RDS3", "single-AZ by configuration (mysql_multi_az=false)")

    def _security_groups(self, network: NetworkStack) -> None:
        functions = network.functions_sg
        self.proxy_sg = ec2.SecurityGroup(self, "ProxySg", vpc=network.vpc,
                                          description="RDS Proxy: MySQL from the functions")
        self.proxy_sg.add_ingress_rule(functions, ec2.Port.tcp(MYSQL_PORT), "functions to RDS Proxy")
        # MySQL from the proxy only (add_proxy admits the proxy's group); the instance calls nothing
        self.database_sg = ec2.SecurityGroup(self, "DatabaseSg", vpc=network.vpc, allow_all_outbound=False,
                                             description="RDS MySQL: MySQL from RDS Proxy")
        self.couchbase_sg = ec2.SecurityGroup(
            self, "CouchbaseSg", vpc=network.vpc,
            description="Couchbase nodes: the SDK ports from the functions, the cluster ports between nodes")
        for low, high in COUCHBASE_PORTS:
            self.couchbase_sg.add_ingress_rule(functions, ec2.Port.tcp_range(low, high), "SDK to nodes")
        for low, high in COUCHBASE_PORTS + COUCHBASE_NODE_PORTS:
            self.couchbase_sg.add_ingress_rule(self.couchbase_sg, ec2.Port.tcp_range(low, high), "node to node")

    def _mysql(self, config: DeployConfig, network: NetworkStack) -> None:
        self.database = rds.DatabaseInstance(
            self, "Mysql",
            engine=rds.DatabaseInstanceEngine.mysql(version=rds.MysqlEngineVersion.VER_8_4_7),
            instance_type=ec2.InstanceType(config.mysql_instance_type),
            vpc=network.vpc, vpc_subnets=network.private, security_groups=[self.database_sg],
            credentials=rds.Credentials.from_generated_secret("blackbox", exclude_characters="\"@/\\'%:?#&+ "),
            database_name=DATABASE,
            allocated_storage=config.mysql_storage_gib,
            storage_type=rds.StorageType.GP3,
            storage_encrypted=True,
            multi_az=config.mysql_multi_az,
            backup_retention=Duration.days(7),
            deletion_protection=config.removal == "retain",
            removal_policy=RemovalPolicy.SNAPSHOT if config.removal == "retain" else config.removal_policy,
            cloudwatch_logs_exports=["error", "slowquery"],
            cloudwatch_logs_retention=LOGS_KEPT,
            enable_performance_insights=True,
            monitoring_interval=Duration.seconds(60),
            auto_minor_version_upgrade=True,
            port=MYSQL_PORT,
        )
        retention = self.node.find_child(f"LogRetention{LOG_RETENTION_ID}")
        acknowledge(retention, "AwsSolutions-IAM5", (
            "the CDK's log-retention function sets the retention of MySQL's log groups, which RDS names"),
            ["Resource::*"])
        assert self.database.secret is not None
        self.mysql_secret = self.database.secret
        # the instance's snapshot is kept with removal=retain, and the credentials that open it with it
        # (the instance's secret is the generated secret's attachment to it)
        generated = self.database.node.find_child("Secret")
        assert isinstance(generated, secretsmanager.Secret)
        generated.apply_removal_policy(config.removal_policy)
        self.proxy = self.database.add_proxy(
            "Proxy", secrets=[self.mysql_secret], vpc=network.vpc, vpc_subnets=network.private,
            security_groups=[self.proxy_sg], require_tls=True, idle_client_timeout=Duration.minutes(30),
            db_proxy_name=f"{config.prefix}-mysql",  # unique per account and region: the stage's prefix
        )
        # single user: the password changes in place; a connection open keeps working, and a new one that
        # the old password fails reads the secret again (adapters.mysql.database). The function is in the
        # private subnets: Secrets Manager through the VPC's endpoint, the instance directly
        rotation = f"{config.prefix}-mysql-rotation"
        self.mysql_rotation = secretsmanager.HostedRotation.mysql_single_user(
            vpc=network.vpc, vpc_subnets=network.private, function_name=rotation)
        self.mysql_secret.add_rotation_schedule("Rotation", hosted_rotation=self.mysql_rotation,
                                                automatically_after=MYSQL_ROTATION)
        # the hosted function is the Secrets Manager transform's, whose log group Lambda makes with no
        # retention at its first run (a deployment made before this has one): the CDK's log-retention
        # function sets it on the group, made or not, as on MySQL's own
        logs.LogRetention(self, "MysqlRotationLogRetention", log_group_name=f"/aws/lambda/{rotation}",
                          retention=LOGS_KEPT, removal_policy=config.removal_policy)
        acknowledge(retention, "AwsSolutions-IAM5", (
            "the CDK's log-retention function deletes the rotation function's log group with a disposable stage"),
            [f"Resource::arn:<AWS::Partition>:logs:{self.region}:<AWS::AccountId>:log-group:/aws/lambda/{rotation}:*"])
        self.database.connections.allow_default_port_from(self.mysql_rotation, "secret rotation to MySQL")

    def _couchbase(self, config: DeployConfig, network: NetworkStack) -> None:
        self.couchbase_admin = _credentials(self, "CouchbaseAdmin", "Administrator", config.removal_policy)
        # what the functions use: read and write on the bucket only
        self.couchbase_app = _credentials(self, "CouchbaseApp", "blackbox-app", config.removal_policy)
        role = iam.Role(self, "CouchbaseRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                            "AmazonSSMManagedInstanceCore")])
        self.couchbase_admin.grant_read(role)
        self.couchbase_app.grant_read(role)
        # the daily backup writes (and `aws s3 sync` lists) under its prefix, and nothing else
        backups = self.couchbase_backups
        role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"],
                                               resources=[backups.arn_for_objects(f"{BACKUP_PREFIX}*")]))
        role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[backups.bucket_arn],
                                               conditions={"StringLike": {"s3:prefix": [f"{BACKUP_PREFIX}*"]}}))
        acknowledge(role, "AwsSolutions-IAM5", "the backups' objects: any key under the couchbase/ prefix",
                    [f"Resource::<{self.get_logical_id(backups.node.default_child)}.Arn>/{BACKUP_PREFIX}*"])  # type: ignore[arg-type]
        # a stable name per node: the instance (and its address) may change, the name does not
        zone = route53.PrivateHostedZone(self, "CouchbaseZone", zone_name=f"couchbase.{config.prefix}.internal",
                                         vpc=network.vpc)
        self.couchbase_hosts = [f"node{index}.{zone.zone_name}" for index in range(config.couchbase_nodes)]
        image = ec2.MachineImage.generic_linux(config.couchbase_ami)
        subnets = network.vpc.private_subnets
        script = USER_DATA.read_text()
        self.couchbase_nodes: list[ec2.Instance] = []
        self.couchbase_records: list[route53.ARecord] = []
        for index, host in enumerate(self.couchbase_hosts):
            node = ec2.Instance(
                self, f"Couchbase{index}",
                vpc=network.vpc, security_group=self.couchbase_sg,
                vpc_subnets=ec2.SubnetSelection(subnets=[subnets[index % len(subnets)]]),  # over the zones
                instance_type=ec2.InstanceType(config.couchbase_instance_type), machine_image=image,
                role=role, require_imdsv2=True, detailed_monitoring=True,
                disable_api_termination=config.removal == "retain",
                block_devices=[
                    ec2.BlockDevice(device_name="/dev/xvda", volume=ec2.BlockDeviceVolume.ebs(
                        30, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3)),
                    ec2.BlockDevice(device_name=DATA_DEVICE, volume=ec2.BlockDeviceVolume.ebs(
                        config.couchbase_volume_gib, encrypted=True, volume_type=ec2.EbsDeviceVolumeType.GP3,
                        delete_on_termination=config.removal == "destroy")),
                ],
            )
            # set on the resource itself: the script signals it by its logical id, known only now
            node.instance.user_data = Fn.base64(Fn.sub(script, {
                "Version": config.couchbase_version, "AdminSecretArn": self.couchbase_admin.secret_arn,
                "AppSecretArn": self.couchbase_app.secret_arn, "NodeIndex": str(index),
                "ClusterName": config.prefix, "DataRamMb": str(max(config.couchbase_bucket_ram_mb, 1024)),
                "Bucket": BUCKET, "BucketRamMb": str(config.couchbase_bucket_ram_mb),
                "Replicas": str(min(config.couchbase_nodes - 1, 2)), "FirstNode": self.couchbase_hosts[0],
                "DataDevice": DATA_DEVICE, "Resource": node.instance.logical_id,
                "BackupBucket": backups.bucket_name, "BackupPrefix": BACKUP_PREFIX,
            }))
            acknowledge(node, "CloudFormation-Validate::W9010", (
                "the image is pinned per region in cdk.json (couchbase_ami): a newer one must not replace the nodes"))
            acknowledge(node, "CloudFormation-Validate::W3010", (
                "the zone is the subnet's, named in cdk.json where the VPC spreads over more than two zones"))
            # the deploy waits for the script's cfn-signal: a node that failed to set up fails it
            node.instance.cfn_options.creation_policy = CfnCreationPolicy(
                resource_signal=CfnResourceSignal(count=1, timeout="PT30M"))
            record = route53.ARecord(self, f"Couchbase{index}Name", zone=zone, record_name=host,
                                     target=route53.RecordTarget.from_ip_addresses(node.instance_private_ip),
                                     ttl=Duration.minutes(1))
            if index:
                # joiners start once node 0 has its cluster (it has signalled) and its name
                node.node.add_dependency(self.couchbase_records[0])
            self.couchbase_nodes.append(node)
            self.couchbase_records.append(record)
        self.couchbase_url = "couchbase://" + ",".join(self.couchbase_hosts)

    def _bucket(self, config: DeployConfig) -> None:
        common = {
            "encryption": s3.BucketEncryption.S3_MANAGED, "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True, "removal_policy": config.removal_policy,
            # a stage that destroys its data empties its buckets first: CloudFormation deletes no bucket
            # with objects, and one of a fixed name left behind fails the next deploy
            "auto_delete_objects": config.removal == "destroy",
        }
        access_logs = s3.Bucket(self, "AccessLogs", object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
                                lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
                                **common)  # type: ignore[arg-type]
        acknowledge(access_logs, "AwsSolutions-S1", "the access-log bucket itself: logging it would log the logging")
        self.bucket = s3.Bucket(
            self, "SpillAndArchives", bucket_name=self.spill_bucket_name, server_access_logs_bucket=access_logs,
            server_access_logs_prefix="spill-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(id="abort-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
                # events capture could not publish: replayed by `blackbox replay`, kept as long as the data
                s3.LifecycleRule(id="spill", prefix="spill/", expiration=Duration.days(config.retention_days)),
                s3.LifecycleRule(id="archives", prefix="archives/", transitions=[
                    s3.Transition(storage_class=s3.StorageClass.INFREQUENT_ACCESS, transition_after=Duration.days(30)),
                    s3.Transition(storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                                  transition_after=Duration.days(90)),
                ]),
            ],
            **common,  # type: ignore[arg-type]
        )
        # batches a consumer gave up on (the event source mappings' on-failure destination), for replay
        self.failed_batches = s3.Bucket(
            self, "FailedBatches", bucket_name=self.failed_batches_name, server_access_logs_bucket=access_logs,
            server_access_logs_prefix="failed-batches/",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(config.retention_days))],
            **common,  # type: ignore[arg-type]
        )
        # the symbol files the stack walker reads (adapters.symbols.s3), kept until deleted: a bucket of
        # their own, so that a role may list it whole (stacks/access.py) and nothing else with it
        self.symbols = s3.Bucket(
            self, "Symbols", bucket_name=self.symbols_bucket_name, server_access_logs_bucket=access_logs,
            server_access_logs_prefix="symbols-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(id="abort-uploads", abort_incomplete_multipart_upload_after=Duration.days(7))],
            **common,  # type: ignore[arg-type]
        )
        # the Couchbase cluster's daily full backups (cbbackupmgr archives), one prefix per day
        self.couchbase_backups = s3.Bucket(
            self, "CouchbaseBackups", server_access_logs_bucket=access_logs,
            server_access_logs_prefix="couchbase-backups/",
            lifecycle_rules=[
                s3.LifecycleRule(id="abort-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
                s3.LifecycleRule(id="backups", prefix=BACKUP_PREFIX,
                                 expiration=Duration.days(config.couchbase_backup_days)),
            ],
            **common,  # type: ignore[arg-type]
        )
        # the CDK's function that empties them, which takes no log group of its own
        emptier = self.node.try_find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
        if emptier is not None:
            handler = emptier.node.find_child("Handler")
            assert isinstance(handler, CfnResource)
            handler.add_property_override("LoggingConfig.LogGroup",
                                          kept_logs(self, "EmptyBucketsLogs", config).log_group_name)

    def _bucket_name(self, purpose: str, account: str = Aws.ACCOUNT_ID) -> str:
        # named, so that other stacks' policies hold the name itself rather than an import, which
        # keeps the ARNs (and cdk-nag's findings on them) predictable; the config holds it to S3's bound
        assert purpose in BUCKET_PURPOSES
        return f"{self._config.prefix}-{purpose}-{account}-{self._config.region}"

    @property
    def spill_bucket_name(self) -> str:
        return self._bucket_name("spill")

    @property
    def failed_batches_name(self) -> str:
        return self._bucket_name("failed-batches")

    @property
    def symbols_bucket_name(self) -> str:
        return self._bucket_name("symbols")

    def objects_finding(self, bucket_name: str, pattern: str) -> str:
        """cdk-nag's IAM5 finding for a grant on `pattern` objects of a bucket named here."""
        purpose = {self.spill_bucket_name: "spill", self.failed_batches_name: "failed-batches",
                   self.symbols_bucket_name: "symbols"}[bucket_name]
        name = self._bucket_name(purpose, "<AWS::AccountId>")
        return f"Resource::arn:<AWS::Partition>:s3:::{name}/{pattern}"

    def _migrations(self, config: DeployConfig, network: NetworkStack) -> None:
        functions = Functions(self, "Functions", config, Placement(
            network.vpc, network.private, network.functions_sg, self.mysql_environment()))
        migrate = functions.function("migrate-schema", "lambdas.provisioning.migrate_schema", timeout_s=600)
        self.mysql_secret.grant_read(migrate)
        migrations_provider = provider(self, "MigrationsProvider", migrate, config)
        migrations = CustomResource(self, "Migrations", service_token=migrations_provider.service_token, properties={
            # a new migration file (or step of migrate's own) changes this, so the deploy applies it
            "Migrations": [*(m.name for m in index_migrations(MYSQL_MIGRATIONS)), *CODE_MIGRATIONS],
        })
        migrations.node.add_dependency(self.proxy)
        acknowledge(migrations_provider, "AwsSolutions-IAM5",
                    "the CDK Provider framework may invoke its handler's versions", [invoke_versions(migrate)])

    def _couchbase_rotation(self, config: DeployConfig, network: NetworkStack) -> None:
        """The application user's secret, rotated by alternating users (adapters.couchbase.rotation)
        through the cluster's REST API, as the administrator."""
        functions = Functions(self, "RotationFunctions", config, Placement(network.vpc, network.private,
                                                                          network.functions_sg, {}))
        rotate = functions.function("couchbase-rotation", "lambdas.couchbase_rotation.handler", timeout_s=60,
                                    environment={
                                        "BLACKBOX_COUCHBASE_ADMIN_SECRET_ARN": self.couchbase_admin.secret_arn,
                                        "BLACKBOX_COUCHBASE_REST_URL": f"http://{self.couchbase_hosts[0]}:8091"})
        self.couchbase_admin.grant_read(rotate)
        schedule = self.couchbase_app.add_rotation_schedule("Rotation", rotation_lambda=rotate,
                                                            automatically_after=COUCHBASE_ROTATION)
        # it rotates once when created: not before the nodes have their cluster and its user, nor before
        # the name it reaches the first by resolves (a lookup that failed may be remembered)
        for node in self.couchbase_nodes:
            schedule.node.add_dependency(node)
        schedule.node.add_dependency(self.couchbase_records[0])
        # a new password for the other user: Secrets Manager's generator, which takes no resource
        rotate.add_to_role_policy(iam.PolicyStatement(actions=["secretsmanager:GetRandomPassword"],
                                                      resources=["*"]))
        acknowledge(rotate, "AwsSolutions-IAM5", "secretsmanager:GetRandomPassword acts on no resource",
                    ["Resource::*"])

    def mysql_environment(self) -> dict[str, str]:
        return {"BLACKBOX_MYSQL_SECRET_ARN": self.mysql_secret.secret_arn,
                "BLACKBOX_MYSQL_PROXY_HOST": self.proxy.endpoint}

    def couchbase_environment(self) -> dict[str, str]:
        return {"BLACKBOX_COUCHBASE_URL": self.couchbase_url, "BLACKBOX_COUCHBASE_BUCKET": BUCKET,
                "BLACKBOX_COUCHBASE_SECRET_ARN": self.couchbase_app.secret_arn}
