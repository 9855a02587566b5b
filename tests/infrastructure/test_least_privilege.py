"""Each function's role, read from the synthesized templates: on the event log exactly the topics
and consumer group of lambdas.functions (FUNCTION_TOPICS, CONSUMERS), with the cluster-level
permission an idempotent producer needs, and only the secrets of its own ports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from adapters.symbols.s3 import PREFIX as SYMBOLS_PREFIX
from lambdas.functions import CONSUMERS, FUNCTION_PORTS, FUNCTION_TOPICS
from pipeline.topics import ALL_TOPICS, READ_GROUP
from stacks.access import SQL_PORTS, SYMBOL_WRITERS
from stacks.app import Blackbox
from stacks.config import DeployConfig, cdk_json_context
from tests.infrastructure.test_durability import flat, listed

DEV = DeployConfig.model_validate(cdk_json_context()["environments"]["dev"])
CLUSTER = "cluster"

Grant = tuple[str, str]


def deployed(dev: Blackbox) -> dict[str, lambda_.Function]:
    return {**dev.api.functions, **dev.processing.functions, "purge": dev.processing.purge,
            "replay": dev.processing.replay, "webhooks": dev.processing.webhooks}


def statements(function: lambda_.Function, templates: dict[str, Template]) -> list[dict[str, Any]]:
    """The statements of every policy attached to the function's role."""
    stack = Stack.of(function)
    found = templates[stack.node.id.removeprefix("BlackboxDev").lower()].to_json()["Resources"]
    role = {"Ref": stack.get_logical_id(function.role.node.default_child)}  # type: ignore[union-attr]
    return [statement for r in found.values() if r["Type"] == "AWS::IAM::Policy" and role in r["Properties"]["Roles"]
            for statement in r["Properties"]["PolicyDocument"]["Statement"]]


def resource_name(resource: Any) -> str:
    """'cluster', 'topic/<name>' or 'group/<name>' for the cluster's ARNs (built from its ARN
    attribute, which the application stacks import)."""
    if "Fn::Join" not in resource:
        assert "ClusterArn" in json.dumps(resource) or resource == {"Fn::GetAtt": ["Cluster", "Arn"]}, resource
        return CLUSTER
    parts = resource["Fn::Join"][1]
    [kind] = [p.removeprefix(":").split("/")[0] for p in parts
              if isinstance(p, str) and p.endswith(("topic/", "group/"))]
    return f"{kind}/{parts[-1].removeprefix('/')}"


def kafka_grants(policy: list[dict[str, Any]]) -> set[Grant]:
    grants = set()
    for statement in policy:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        kafka = [a for a in actions if a.startswith("kafka-cluster:")]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        grants |= {(action, resource_name(resource)) for action in kafka for resource in resources}
    return grants


def topic(name: str) -> str:
    return f"topic/{DEV.prefix}.{name}"


def expected_kafka_grants(function: str) -> set[Grant]:
    """Connect; write (idempotently, a cluster-level permission) what it writes, read what it
    reads; a consumer's group and the cluster configuration for its event source mapping."""
    if "log" not in FUNCTION_PORTS[function]:
        return set()
    access = FUNCTION_TOPICS[function]
    grants = {("kafka-cluster:Connect", CLUSTER), ("kafka-cluster:DescribeCluster", CLUSTER)}
    if access.writes:
        grants.add(("kafka-cluster:WriteDataIdempotently", CLUSTER))
    for name in access.writes:
        grants |= {("kafka-cluster:DescribeTopic", topic(name)), ("kafka-cluster:WriteData", topic(name))}
    for name in access.reads:
        grants |= {("kafka-cluster:DescribeTopic", topic(name)), ("kafka-cluster:ReadData", topic(name))}
    if access.reads:
        # a record read by offset: librdkafka needs a group, found through its coordinator, never joined
        grants.add(("kafka-cluster:DescribeGroup", f"group/{DEV.prefix}.{READ_GROUP}"))
    if function in CONSUMERS:
        group = f"group/{DEV.prefix}-{function}"
        grants |= {("kafka-cluster:DescribeClusterDynamicConfiguration", CLUSTER),
                   ("kafka-cluster:DescribeGroup", group), ("kafka-cluster:AlterGroup", group)}
    return grants


def test_the_topic_table_covers_every_function_of_the_log():
    assert sorted(FUNCTION_TOPICS) == sorted(f for f, ports in FUNCTION_PORTS.items() if "log" in ports)


@pytest.mark.parametrize("function", sorted(FUNCTION_PORTS))
def test_a_function_may_touch_its_own_topics_and_group_only(function: str, dev: Blackbox,
                                                             templates: dict[str, Template]):
    assert kafka_grants(statements(deployed(dev)[function], templates)) == expected_kafka_grants(function)


def test_every_producer_may_write_idempotently(dev: Blackbox, templates: dict[str, Template]):
    """The producer sets enable.idempotence: MSK refuses its InitProducerId without this, and
    capture would spill every event."""
    writers = [f for f, access in FUNCTION_TOPICS.items() if access.writes]
    assert {"capture", "crash-consumer", "replay"} <= set(writers)
    for function in writers:
        grants = kafka_grants(statements(deployed(dev)[function], templates))
        assert ("kafka-cluster:WriteDataIdempotently", CLUSTER) in grants, function


# the minidump processor asks for walks on its own topic: a page of the reports that awaited a symbol
# file, and the next page only when this one was full; a report raced by its symbols, once
FEEDS_ITSELF = {"minidump-processor"}


def test_a_consumer_cannot_publish_to_the_topic_it_reads(dev: Blackbox, templates: dict[str, Template]):
    for function, consumed in CONSUMERS.items():
        grants = kafka_grants(statements(deployed(dev)[function], templates))
        assert (("kafka-cluster:WriteData", topic(consumed)) in grants) == (function in FEEDS_ITSELF)
        assert ("kafka-cluster:WriteData", topic("deadletter")) in grants


@pytest.mark.parametrize("function", sorted(FUNCTION_PORTS))
def test_a_function_may_read_the_secrets_of_its_own_ports_only(function: str, dev: Blackbox,
                                                               templates: dict[str, Template]):
    data = dev.data
    secrets = {"mysql": data.get_logical_id(data.mysql_secret.node.default_child),  # type: ignore[arg-type]
               "couchbase": data.get_logical_id(data.couchbase_app.node.default_child)}  # type: ignore[arg-type]
    readable = [json.dumps(s["Resource"]) for s in statements(deployed(dev)[function], templates)
                if "secretsmanager:GetSecretValue" in s["Action"]]
    granted = {name for name, logical_id in secrets.items() if any(logical_id in r for r in readable)}
    ports = FUNCTION_PORTS[function]
    assert granted == {name for name, used in (("mysql", ports & SQL_PORTS), ("couchbase", "documents" in ports))
                       if used}
    assert len(readable) == len(granted), readable  # no secret besides those


@pytest.mark.parametrize("function", sorted(FUNCTION_PORTS))
def test_a_function_of_the_symbols_port_may_use_the_symbols_bucket_and_no_other(function: str, dev: Blackbox,
                                                                               templates: dict[str, Template]):
    """Get under symbols/ (put and delete too, for the function that uploads them), and list the
    bucket, which holds nothing else: S3 answers a get of a missing file 404 only to a role that
    may list the bucket, and 403 to any other."""
    name = f"{DEV.prefix}-symbols-<AWS::AccountId>-{DEV.region}"
    bucket, objects = f"arn:<AWS::Partition>:s3:::{name}", f"arn:<AWS::Partition>:s3:::{name}/{SYMBOLS_PREFIX}*"
    lambda_function = deployed(dev)[function]
    grants = {(action, flat(resource), json.dumps(s.get("Condition")))
              for s in statements(lambda_function, templates)
              for action in listed(s["Action"]) for resource in listed(s["Resource"])
              if "-symbols-" in flat(resource)}
    stack = Stack.of(lambda_function)
    found = templates[stack.node.id.removeprefix("BlackboxDev").lower()].to_json()["Resources"]
    told = found[stack.get_logical_id(lambda_function.node.default_child)]["Properties"]["Environment"]["Variables"]
    if "symbols" in FUNCTION_PORTS[function]:
        unconditioned = "null"
        writes = {("s3:PutObject", objects, unconditioned), ("s3:DeleteObject", objects, unconditioned)}
        assert grants == {("s3:GetObject", objects, unconditioned), ("s3:ListBucket", bucket, unconditioned),
                          *(writes if function in SYMBOL_WRITERS else ())}
        assert flat(told["BLACKBOX_SYMBOLS_BUCKET"]) == name
    else:
        assert grants == set() and "BLACKBOX_SYMBOLS_BUCKET" not in told


def test_the_topics_custom_resource_may_create_and_configure_the_topics_only(dev: Blackbox,
                                                                            templates: dict[str, Template]):
    [create] = [c for c in dev.streaming.node.find_all() if isinstance(c, lambda_.Function)
                and c.node.id == "create-topics"]
    provision = {"kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic",
                 "kafka-cluster:DescribeTopicDynamicConfiguration", "kafka-cluster:AlterTopicDynamicConfiguration"}
    assert kafka_grants(statements(create, templates)) == {
        ("kafka-cluster:Connect", CLUSTER), ("kafka-cluster:DescribeCluster", CLUSTER),
        *((action, topic(name)) for action in provision for name in ALL_TOPICS)}
