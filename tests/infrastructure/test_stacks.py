"""Fine-grained assertions on every stack of the dev environment (cdk.json), and on how the prod
environment differs."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template
from pydantic import ValidationError

from adapters.kafka.log import ADMIN_TIMEOUT_S, PROVISION_WITHIN_S
from adapters.settings import Settings
from adapters.spill.s3 import PREFIX as SPILL_PREFIX
from adapters.symbols.s3 import PREFIX as SYMBOLS_PREFIX
from crashes.processing import BEGIN_WITH_S
from lambdas.functions import API_ROUTES, CONSUMERS, FUNCTION_PORTS
from pipeline.topics import ALL_TOPICS, DEADLETTER
from ports import PUBLISH_TIMEOUT_S
from stacks.access import SQL_PORTS
from stacks.api import SENTRY_ROUTES
from stacks.app import Blackbox
from stacks.config import DeployConfig, cdk_json_context
from tests.infrastructure.conftest import blackbox, resources

DEV = DeployConfig.model_validate(cdk_json_context()["environments"]["dev"])


def as_text(value: Any) -> str:
    return json.dumps(value)


def test_config_is_validated():
    with pytest.raises(ValidationError):
        DeployConfig.model_validate({"region": "mars-1", "couchbase_nodes": 0})
    with pytest.raises(ValidationError):
        DeployConfig.model_validate({"region": "us-east-1", "surprise": True})
    with pytest.raises(ValueError, match="no environment 'nope'"):
        blackbox("nope")


def test_a_prefix_that_would_name_a_bucket_past_s3s_63_characters_is_refused():
    """Found from outside: a prefix of 21 characters in a region of 14 named the failed-batch bucket
    with 64, and the deploy failed at that bucket, minutes in."""
    settings = {"region": "ap-southeast-2", "couchbase_ami": {"ap-southeast-2": "ami-0123456789abcdef0"}}
    with pytest.raises(ValidationError, match="63"):
        DeployConfig.model_validate({**settings, "prefix": "a" * 21})
    config = DeployConfig.model_validate({**settings, "prefix": "a" * 20})
    assert len(f"{config.prefix}-failed-batches-{'0' * 12}-{config.region}") == 63


def test_network(templates: dict[str, Template]):
    network = templates["network"]
    network.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": DEV.vpc_cidr})
    network.resource_count_is("AWS::EC2::NatGateway", DEV.nat_gateways)
    private = [s for s in resources(network, "AWS::EC2::Subnet") if not s.get("MapPublicIpOnLaunch")]
    assert len(private) == DEV.max_azs
    network.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "REJECT"})
    endpoints = {as_text(e["ServiceName"]): e["VpcEndpointType"] for e in resources(network, "AWS::EC2::VPCEndpoint")}
    for service in ("secretsmanager", "sts", "lambda"):
        assert any(service in name and kind == "Interface" for name, kind in endpoints.items()), service
    assert any(".s3" in name and kind == "Gateway" for name, kind in endpoints.items())
    network.has_resource_properties("AWS::EC2::SecurityGroupIngress", {"IpProtocol": "tcp", "FromPort": 9098,
                                                                       "ToPort": 9098})


def test_streaming(templates: dict[str, Template]):
    streaming = templates["streaming"]
    streaming.has_resource_properties("AWS::MSK::ServerlessCluster", {
        "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}}, "ClusterName": DEV.prefix})
    [brokers] = resources(streaming, "Custom::AWS")
    assert "getBootstrapBrokers" in as_text(brokers) and "BootstrapBrokerStringSaslIam" in as_text(brokers)
    [topics] = [r for r in resources(streaming, "AWS::CloudFormation::CustomResource")]
    assert topics["Partitions"] == str(DEV.topic_partitions)
    # what each topic keeps is a property of the resource: a changed retention updates the topics of
    # a deployed stack (a change only to the function's environment would not run it again)
    assert topics["RetentionDays"] == {f"{DEV.prefix}.{t}": str(DEV.retention_days if t == DEADLETTER else
                                                                 DEV.log_retention_days) for t in ALL_TOPICS}
    assert DEV.retention_days != DEV.log_retention_days
    streaming.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "lambdas.provisioning.create_topics", "VpcConfig": Match.any_value(),
        "Environment": {"Variables": Match.object_like({"BLACKBOX_PROFILE": "aws",
                                                        "BLACKBOX_KAFKA_TOPIC_PREFIX": f"{DEV.prefix}."})}})
    policy = as_text(resources(streaming, "AWS::IAM::Policy"))
    assert "kafka-cluster:CreateTopic" in policy and f"/{DEV.prefix}.crashes" in policy


def test_data(templates: dict[str, Template]):
    data = templates["data"]
    data.has_resource_properties("AWS::RDS::DBInstance", {
        "Engine": "mysql", "StorageEncrypted": True, "MultiAZ": DEV.mysql_multi_az,
        "DBInstanceClass": f"db.{DEV.mysql_instance_type}", "DBName": "blackbox"})
    data.has_resource_properties("AWS::RDS::DBProxy", {"RequireTLS": True, "EngineFamily": "MYSQL"})
    data.has_resource_properties("AWS::CloudFormation::CustomResource", {"Migrations": Match.array_with(
        ["0001_crash_index_and_counters.sql", "0003_applied_events.sql"])})
    # found in review: a step of migrate() that is no file (text compared exactly) never ran on a
    # deployed stack, whose migrations run again only when these change
    data.has_resource_properties("AWS::CloudFormation::CustomResource", {"Migrations": Match.array_with(
        ["exact-text"])})
    data.resource_count_is("AWS::EC2::Instance", DEV.couchbase_nodes)
    [node] = resources(data, "AWS::EC2::Instance")
    assert node["InstanceType"] == DEV.couchbase_instance_type
    volumes = {d["DeviceName"]: d["Ebs"] for d in node["BlockDeviceMappings"]}
    assert volumes["/dev/sdf"] == {"Encrypted": True, "VolumeSize": DEV.couchbase_volume_gib, "VolumeType": "gp3",
                                   "DeleteOnTermination": True}
    user_data = as_text(node["UserData"])
    assert "Fn::Sub" in user_data and "cluster-init" in user_data and "bucket-create" in user_data
    assert "couchbase-server-community-${Version}" in user_data and DEV.couchbase_version in user_data
    data.has_resource_properties("AWS::EC2::LaunchTemplate", {"LaunchTemplateData": {
        "MetadataOptions": {"HttpTokens": "required"}}})
    data.resource_count_is("AWS::SecretsManager::Secret", 3)  # MySQL, Couchbase admin and application user
    buckets = resources(data, "AWS::S3::Bucket")
    assert all(b["PublicAccessBlockConfiguration"]["BlockPublicAcls"] for b in buckets)
    [spill] = [b for b in buckets if "spill" in as_text(b.get("BucketName"))]
    rules = {r["Id"]: r for r in spill["LifecycleConfiguration"]["Rules"] if "Id" in r}
    assert rules["spill"]["ExpirationInDays"] == DEV.retention_days and rules["spill"]["Prefix"] == "spill/"
    assert [t["StorageClass"] for t in rules["archives"]["Transitions"]] == ["STANDARD_IA", "GLACIER_IR"]


def test_api(dev: Blackbox, templates: dict[str, Template]):
    api = templates["api"]
    methods = resources(api, "AWS::ApiGateway::Method")
    assert sorted(m["HttpMethod"] for m in methods) == sorted(r.method for r in API_ROUTES)
    native_api = {"Ref": dev.api.get_logical_id(dev.api.native_api.node.default_child)}  # type: ignore[arg-type]
    for method in methods:
        if method["RestApiId"] == native_api:  # a Sentry SDK's: its key from the authorizer
            assert method["ApiKeyRequired"] is True and method["AuthorizationType"] == "CUSTOM"
            assert "AuthorizerId" in method
        elif method.get("ApiKeyRequired"):  # capture's: game clients and servers
            assert method["HttpMethod"] == "POST" and method["AuthorizationType"] == "NONE"
            assert "application/json" in method["RequestModels"]
            assert "RequestValidatorId" in method
        else:
            assert method["AuthorizationType"] == "AWS_IAM" and "RequestValidatorId" in method
    assert len([m for m in methods if m["RestApiId"] == native_api]) == len(SENTRY_ROUTES) >= 2
    assert len([m for m in methods if m.get("ApiKeyRequired") and m["RestApiId"] != native_api]) == len(
        [r for r in API_ROUTES if r.ingest]) >= 3
    apis = {a["Name"]: a for a in resources(api, "AWS::ApiGateway::RestApi")}
    assert apis[DEV.prefix]["ApiKeySourceType"] == "HEADER"
    assert apis[f"{DEV.prefix}-native"]["ApiKeySourceType"] == "AUTHORIZER"
    assert apis[f"{DEV.prefix}-native"]["BinaryMediaTypes"] == ["*/*"]  # a gzip body arrives as sent
    [authorizer] = resources(api, "AWS::ApiGateway::Authorizer")
    assert authorizer["Type"] == "REQUEST" and authorizer["AuthorizerResultTtlInSeconds"] == 0
    # every plan throttles its key on both APIs
    for plan in resources(api, "AWS::ApiGateway::UsagePlan"):
        assert len(plan["ApiStages"]) == 2
    api.has_resource_properties("AWS::ApiGateway::Method", {
        "HttpMethod": "GET", "RequestParameters": {"method.request.querystring.sku": True}})
    api.resource_count_is("AWS::ApiGateway::ApiKey", 2 + len(DEV.titles))  # ingest, server, a key per title
    plans = {p["UsagePlanName"]: p["Throttle"] for p in resources(api, "AWS::ApiGateway::UsagePlan")}
    assert plans[f"{DEV.prefix}-ingest"] == {"RateLimit": DEV.ingest_throttle.rate,
                                             "BurstLimit": DEV.ingest_throttle.burst}
    assert plans[f"{DEV.prefix}-server"]["RateLimit"] == DEV.server_throttle.rate
    responses = {r["ResponseType"]: r for r in resources(api, "AWS::ApiGateway::GatewayResponse")}
    assert responses["THROTTLED"]["StatusCode"] == "429"
    assert '"error": "throttled"' in responses["THROTTLED"]["ResponseTemplates"]["application/json"]
    assert '"error": "payload_too_large"' in responses["REQUEST_TOO_LARGE"]["ResponseTemplates"]["application/json"]
    # a body model per route with a JSON body, from the contract's schemas, as a first gate (a symbol
    # file is bytes, read by its handler; a ban and a reprocessing take no body)
    models = [m["Schema"] for m in resources(api, "AWS::ApiGateway::Model")]
    assert len(models) == len([r for r in API_ROUTES if r.method in ("POST", "PUT") and r not in SENTRY_ROUTES
                               and r.path not in ("/v1/symbols", "/v1/bans/{playerId}",
                                                  "/v1/crash-groups:reprocess")])
    assert any(s.get("required") == ["sku"] for s in models)  # a crash report, its schema at the root
    definitions = {name: d for schema in models for name, d in schema.get("definitions", {}).items()}
    assert definitions["Score"]["additionalProperties"] is False
    assert sorted(definitions["Score"]["required"]) == ["board", "playerId", "score"]
    assert any("anyOf" in s and s["anyOf"][1]["maxItems"] == 500 for s in models)
    # what API Gateway would count or match otherwise than the handlers is left to them
    assert "maxLength" not in json.dumps(models) and "\\\\w" not in json.dumps(models)
    [capture] = [f for f in resources(api, "AWS::Lambda::Function") if f["Handler"] == "lambdas.capture.handler"]
    server_key_ids = as_text(capture["Environment"]["Variables"]["BLACKBOX_SERVER_KEY_IDS"])
    assert "ServerKey" in server_key_ids and "IngestKey" not in server_key_ids
    api.has_resource_properties("AWS::ApiGateway::Stage", {"AccessLogSetting": Match.any_value(),
                                                           "TracingEnabled": True})
    # each route's integration invokes the function that owns it locally
    for method, function in ((r.method, r.function) for r in API_ROUTES):
        logical_id = dev.api.get_logical_id(dev.api.functions[function].node.default_child)  # type: ignore[arg-type]
        api.has_resource_properties("AWS::ApiGateway::Method", {
            "HttpMethod": method,
            "Integration": {"Type": "AWS_PROXY", "Uri": Match.object_like({
                "Fn::Join": Match.array_with([Match.array_with([Match.object_like({
                    "Fn::GetAtt": [logical_id, "Arn"]})])])})},
        })


def test_processing(templates: dict[str, Template]):
    processing = templates["processing"]
    mappings = {m["Topics"][0]: m for m in resources(processing, "AWS::Lambda::EventSourceMapping")}
    assert sorted(mappings) == sorted(f"{DEV.prefix}.{t}" for t in CONSUMERS.values())
    worker = mappings[f"{DEV.prefix}.scores"]
    assert worker["BatchSize"] == DEV.ranking_worker.batch_size
    assert worker["MaximumBatchingWindowInSeconds"] == DEV.ranking_worker.batching_window_s
    assert worker["StartingPosition"] == "TRIM_HORIZON"
    assert worker["AmazonManagedKafkaEventSourceConfig"] == {"ConsumerGroupId": f"{DEV.prefix}-ranking-worker"}
    assert "s3" in as_text(worker["DestinationConfig"]["OnFailure"]["Destination"])
    for function in resources(processing, "AWS::Lambda::Function"):
        assert function["Runtime"] == "python3.12" and "VpcConfig" in function and function["Layers"]
        assert function["Environment"]["Variables"]["BLACKBOX_PROFILE"] == "aws"
    # least privilege: a consumer reads exactly the topics and its own group, nothing with a wildcard
    policies = as_text(resources(processing, "AWS::IAM::Policy"))
    assert "kafka-cluster:ReadData" in policies and "group/" in policies and "kafka-cluster:*" not in policies
    assert f"/{DEV.prefix}-crash-consumer" in policies
    # the purge runs daily, on a schedule, with the stores' grants and no consumer group
    assert "cron(17 3 * * ? *)" in [r["ScheduleExpression"] for r in resources(processing, "AWS::Events::Rule")]
    [purge] = [f for f in resources(processing, "AWS::Lambda::Function") if f["Handler"] == "lambdas.purge.handler"]
    assert purge["Timeout"] == 900
    assert "lambda:InvokeFunction" in as_text(resources(processing, "AWS::Lambda::Permission"))
    # the webhooks' delivery runs every minute, a run EventBridge could not start kept in a queue
    [rule] = [r for r in resources(processing, "AWS::Events::Rule") if r["ScheduleExpression"] == "rate(1 minute)"]
    [target] = rule["Targets"]
    assert "WebhooksDeadLetters" in as_text(target["DeadLetterConfig"]) and target["RetryPolicy"]
    [webhooks] = [f for f in resources(processing, "AWS::Lambda::Function")
                  if f["Handler"] == "lambdas.webhooks.handler"]
    assert webhooks["Timeout"] < 60  # done before the next run


# what each kind of port puts in a function's role and in its environment
PORT_TRACES = {
    frozenset({"log"}): ("kafka-cluster:Connect", "BLACKBOX_KAFKA_BOOTSTRAP"),  # its topics: test_least_privilege
    SQL_PORTS: ("MysqlSecret", "BLACKBOX_MYSQL_SECRET_ARN"),
    frozenset({"documents"}): ("CouchbaseApp", "BLACKBOX_COUCHBASE_SECRET_ARN"),
    frozenset({"spill"}): (f"/{SPILL_PREFIX}*", "BLACKBOX_SPILL_BUCKET"),
    frozenset({"symbols"}): (f"/{SYMBOLS_PREFIX}*", "BLACKBOX_SYMBOLS_BUCKET"),
}


def test_each_function_is_granted_and_told_of_its_own_ports_only(dev: Blackbox, templates: dict[str, Template]):
    deployed = {**dev.api.functions, **dev.processing.functions, "purge": dev.processing.purge,
                "replay": dev.processing.replay, "webhooks": dev.processing.webhooks}
    assert sorted(deployed) == sorted(FUNCTION_PORTS)
    policies: dict[str, str] = {}
    for name, function in deployed.items():
        stack = Stack.of(function)
        found = templates[stack.node.id.removeprefix("BlackboxDev").lower()].to_json()["Resources"]
        role = {"Ref": stack.get_logical_id(function.role.node.default_child)}  # type: ignore[union-attr]
        policies[name] = as_text([r for r in found.values()
                                  if r["Type"] == "AWS::IAM::Policy" and role in r["Properties"]["Roles"]])
        environment = found[stack.get_logical_id(function.node.default_child)]["Properties"]["Environment"]
        granted = {ports for ports, (grant, _) in PORT_TRACES.items() if grant in policies[name]}
        told = {ports for ports, (_, variable) in PORT_TRACES.items() if variable in environment["Variables"]}
        used = {ports for ports in PORT_TRACES if ports & FUNCTION_PORTS[name]}
        assert granted == told == used, name
    # capture spills while the stores are away, so it needs none of them: it can read no secret
    assert "secretsmanager" not in policies["capture"]
    assert "secretsmanager:GetSecretValue" in policies["reporter"]


def test_observability(templates: dict[str, Template]):
    observability = templates["observability"]
    body = as_text(resources(observability, "AWS::CloudWatch::Dashboard")[0]["DashboardBody"])
    for metric in ("OffsetLag", "VisibilityLatency", "DeadLetters", "Errors", "5XXError", "Count"):
        assert metric in body, metric
    alarms = resources(observability, "AWS::CloudWatch::Alarm")
    names = {a["AlarmName"] for a in alarms}
    assert {f"{DEV.prefix}-VisibilityP95", f"{DEV.prefix}-DeadLetters", f"{DEV.prefix}-CrashSpike"} <= names
    assert all(a["AlarmActions"] for a in alarms)
    observability.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def test_prod_is_sized_for_production():
    _, prod = blackbox("prod")
    data = Template.from_stack(prod.data)
    data.resource_count_is("AWS::EC2::Instance", 3)
    data.has_resource_properties("AWS::RDS::DBInstance", {"MultiAZ": True, "DeletionProtection": True})
    data.has_resource(("AWS::S3::Bucket"), {"DeletionPolicy": "Retain"})
    Template.from_stack(prod.network).resource_count_is("AWS::EC2::NatGateway", 2)


def test_every_deployed_handler_is_importable(templates: dict[str, Template]):
    handlers = {f["Handler"] for t in templates.values() for f in resources(t, "AWS::Lambda::Function")
                if f.get("Handler", "").startswith("lambdas.")}
    assert len(handlers) == 18  # fifteen functions, two deploy-time custom resources, the Couchbase rotation
    for handler in handlers:
        module, function = handler.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), function)), handler


def test_each_deploy_time_function_outlasts_what_it_waits_for(templates: dict[str, Template]):
    """The custom resources wait for a cluster or a proxy that may not answer for minutes: a Lambda
    cut off by its own timeout fails the deploy with no reason given. One admin attempt may start
    just before the topics' deadline; the first one outlasts a publish (a cold SASL_SSL client)."""
    timeouts = {f["Handler"]: f["Timeout"] for t in templates.values() for f in resources(t, "AWS::Lambda::Function")
                if f.get("Handler", "").startswith("lambdas.provisioning.")}
    assert timeouts["lambdas.provisioning.create_topics"] > PROVISION_WITHIN_S + ADMIN_TIMEOUT_S + 1
    assert timeouts["lambdas.provisioning.migrate_schema"] > Settings().mysql_migrate_deadline_s + 60
    assert ADMIN_TIMEOUT_S > 5 * PUBLISH_TIMEOUT_S


def test_the_minidump_processor_outlasts_the_walks_of_a_report_it_begins(templates: dict[str, Template]):
    """Found from outside: a batch of 5 reports walked at the walker's bounds outlasted the 420 s
    timeout, and each retry did it all again. The processor begins a report past the first only with
    BEGIN_WITH_S of the invocation left (crashes.processing): the first must fit too, with its writes."""
    [walker] = [f for t in templates.values() for f in resources(t, "AWS::Lambda::Function")
                if f.get("Handler") == "lambdas.minidump_processor.handler"]
    assert walker["Timeout"] > BEGIN_WITH_S + 30


def test_the_hosted_rotation_functions_logs_expire(templates: dict[str, Template]):
    """Found in review: the MySQL rotation function is the Secrets Manager transform's, and Lambda
    made its log group at its first run, with no retention: the test below sees only those declared.
    Its retention is set on the group whether it was made or not (a deployment of before has it:
    a log group declared by that name would fail its update)."""
    data = templates["data"]
    [schedule] = [s for s in data.find_resources("AWS::SecretsManager::RotationSchedule").values()
                  if "HostedRotationLambda" in s["Properties"]]
    name = schedule["Properties"]["HostedRotationLambda"]["RotationLambdaName"]
    [retention] = [r["Properties"] for r in data.find_resources("Custom::LogRetention").values()
                   if r["Properties"]["LogGroupName"] == f"/aws/lambda/{name}"]
    assert int(retention["RetentionInDays"]) > 0
    assert not any(g["Properties"].get("LogGroupName") == f"/aws/lambda/{name}"
                   for g in data.find_resources("AWS::Logs::LogGroup").values())


def test_every_log_group_the_deployment_makes_expires(templates: dict[str, Template]):
    """CloudWatch keeps a log group with no retention forever, at a price a month: each function's,
    the CDK's own helpers' among them (custom resources, the buckets' auto-delete), and MySQL's
    exported logs. The CDK's log-retention function keeps its own a day (it sets that itself)."""
    assert DEV.removal == "destroy"
    for name, template in templates.items():
        groups = template.find_resources("AWS::Logs::LogGroup")
        assert all(g["Properties"].get("RetentionInDays") for g in groups.values()), name
        # and a disposable environment's go with it, or each `cdk destroy` leaves one behind
        assert {g["DeletionPolicy"] for g in groups.values()} <= {"Delete"}, name
        for logical_id, function in template.find_resources("AWS::Lambda::Function").items():
            if logical_id.startswith("LogRetention"):
                continue
            group = function["Properties"].get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
            assert group in groups, (name, logical_id)
    [database] = resources(templates["data"], "AWS::RDS::DBInstance")
    # MySQL's, which RDS names after the instance (the hosted rotation function's: the test above)
    retained = {(r["LogGroupName"]["Fn::Join"][1][-1], r["RetentionInDays"])
                for r in resources(templates["data"], "Custom::LogRetention") if isinstance(r["LogGroupName"], dict)}
    functions = templates["data"].find_resources("AWS::Lambda::Function")
    groups = templates["data"].find_resources("AWS::Logs::LogGroup")
    [kept] = {groups[f["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]["RetentionInDays"]
              for logical_id, f in functions.items() if not logical_id.startswith("LogRetention")}
    assert retained == {(f"/{kind}", kept) for kind in database["EnableCloudwatchLogsExports"]}
