"""Nothing held back in AWS is left there: the scheduled replay (in the VPC, with exactly its
grants), and the metrics and alarms on spills, failed batches, dead letters and consumer lag,
delivered through a topic whose key CloudWatch may use."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk.assertions import Template

from lambdas.functions import CONSUMERS
from pipeline.topics import CONSUMED, READ_GROUP
from ports.telemetry import DEAD_LETTERS, FAILED_BATCHES, NAMESPACE, SPILLED_EVENTS, SPILLS_SET_ASIDE
from stacks.app import Blackbox
from stacks.processing import REPLAY_INTERVAL, REPLAY_TIMEOUT_S, WEBHOOKS_INTERVAL
from tests.infrastructure.conftest import resources
from tests.infrastructure.test_stacks import DEV


def role_statements(template: Template, stack: Stack, function: Any) -> list[dict[str, Any]]:
    role = {"Ref": stack.get_logical_id(function.role.node.default_child)}
    return [statement
            for policy in resources(template, "AWS::IAM::Policy") if role in policy["Roles"]
            for statement in policy["PolicyDocument"]["Statement"]]


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_replay_runs_in_the_vpc_every_five_minutes(dev: Blackbox, templates: dict[str, Template]):
    processing = templates["processing"]
    [replay] = [f for f in resources(processing, "AWS::Lambda::Function") if f["Handler"] == "lambdas.replay.handler"]
    assert replay["VpcConfig"]["SubnetIds"] and replay["VpcConfig"]["SecurityGroupIds"]
    assert replay["Timeout"] == REPLAY_TIMEOUT_S < 300  # done before the next run starts
    logical_id = Stack.of(dev.processing.replay).get_logical_id(dev.processing.replay.node.default_child)
    [rule] = [r for r in resources(processing, "AWS::Events::Rule") if r["ScheduleExpression"] == "rate(5 minutes)"]
    assert [t["Arn"] for t in rule["Targets"]] == [{"Fn::GetAtt": [logical_id, "Arn"]}]
    # (the webhooks' delivery, scheduled too, has its own)
    [retries] = [c for c in resources(processing, "AWS::Lambda::EventInvokeConfig")
                 if c["FunctionName"] == {"Ref": logical_id}]
    assert retries["MaximumRetryAttempts"] == 0


def flat(value: Any) -> str:
    """A CloudFormation string, Fn::Join and Ref spelled out as cdk-nag spells them."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(flat(part) for part in parts)
    return "<?>"  # an import, a Select: what another stack decides


def test_the_replay_reads_the_bucket_the_mappings_write_to(templates: dict[str, Template]):
    processing = templates["processing"]
    [replay] = [f for f in resources(processing, "AWS::Lambda::Function") if f["Handler"] == "lambdas.replay.handler"]
    bucket = flat(replay["Environment"]["Variables"]["BLACKBOX_FAILED_BATCHES_BUCKET"])
    assert bucket == f"{DEV.prefix}-failed-batches-<AWS::AccountId>-{DEV.region}"
    destinations = {flat(m["DestinationConfig"]["OnFailure"]["Destination"])
                    for m in resources(processing, "AWS::Lambda::EventSourceMapping")}
    assert destinations == {f"arn:<AWS::Partition>:s3:::{bucket}"}


def test_a_consumer_may_only_put_objects_in_the_failed_batch_bucket_and_list_it(dev: Blackbox,
                                                                                 templates: dict[str, Template]):
    """What Lambda's docs ask of the role for a Kafka mapping's S3 destination (s3:PutObject and
    s3:ListBucket): a consumer that could read or delete the failed batches could lose one."""
    bucket = f"arn:<AWS::Partition>:s3:::{DEV.prefix}-failed-batches-<AWS::AccountId>-{DEV.region}"
    for name, function in dev.processing.functions.items():
        statements = role_statements(templates["processing"], dev.processing, function)
        grants = {(action, flat(resource)) for s in statements if "failed-batches" in json.dumps(s["Resource"])
                  for action in listed(s["Action"]) for resource in listed(s["Resource"])}
        assert grants == {("s3:PutObject", f"{bucket}/*"), ("s3:ListBucket", bucket)}, name


def test_each_consumer_mapping_runs_in_provisioned_mode_where_its_retries_apply(templates: dict[str, Template]):
    """Lambda documents a Kafka mapping's retry count (and record age, batch splitting) as settings
    of provisioned mode: in the default on-demand mode the retry count would not hold."""
    configs = {f"{DEV.prefix}.{topic}": getattr(DEV, name.replace("-", "_")) for name, topic in CONSUMERS.items()}
    mappings = resources(templates["processing"], "AWS::Lambda::EventSourceMapping")
    assert sorted(m["Topics"][0] for m in mappings) == sorted(configs)
    for mapping in mappings:
        consumer = configs[mapping["Topics"][0]]
        assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": consumer.min_pollers,
                                                      "MaximumPollers": consumer.max_pollers}
        assert mapping["MaximumRetryAttempts"] == consumer.retries


def test_the_replay_has_exactly_its_grants(dev: Blackbox, templates: dict[str, Template]):
    statements = role_statements(templates["processing"], dev.processing, dev.processing.replay)
    actions: dict[str, list[str]] = {}
    for statement in statements:
        for action in listed(statement["Action"]):
            actions.setdefault(action, []).extend(flat(r) for r in listed(statement["Resource"]))
    text = json.dumps(statements)
    # the failed-batch bucket: list it, read and delete its objects, nothing else
    failed = [s for s in statements if "failed-batches" in json.dumps(s["Resource"])]
    assert sorted(a for s in failed for a in listed(s["Action"])) == ["s3:DeleteObject", "s3:GetObject",
                                                                      "s3:ListBucket"]
    # the spill: read and delete under its prefix (publishing again is what empties it)
    assert all("/spill/*" in r for a in ("s3:GetObject", "s3:DeleteObject") for r in actions[a]
               if "failed-batches" not in r)
    # the consumed topics, where failed batches and spill go back: publish, and read a batch back by
    # offset; not the dead letters (that replay is `blackbox replay --dead-letters`), no consumer group
    # (only the group a read by offset names, described and never joined), no secret
    assert {"kafka-cluster:WriteData", "kafka-cluster:ReadData", "kafka-cluster:DescribeTopic"} <= set(actions)
    for action in ("kafka-cluster:WriteData", "kafka-cluster:ReadData"):
        consumed = sorted(f"{DEV.prefix}.{t}" for t in CONSUMED)
        assert sorted(r.rsplit("/", 1)[1] for r in actions[action]) == consumed
    assert [r.rsplit("/", 1)[1] for r in actions["kafka-cluster:DescribeGroup"]] == [f"{DEV.prefix}.{READ_GROUP}"]
    assert "AlterGroup" not in text and "secretsmanager" not in text
    assert not any(a.endswith("*") and a != "kms:GenerateDataKey*" for a in actions), sorted(actions)


def alarm(template: Template, name: str) -> dict[str, Any]:
    [found] = [a for a in resources(template, "AWS::CloudWatch::Alarm") if a["AlarmName"] == f"{DEV.prefix}-{name}"]
    return found


def test_alarms_on_what_is_held_back_and_on_lag(dev: Blackbox, templates: dict[str, Template]):
    observability = templates["observability"]
    for name in (SPILLED_EVENTS, SPILLS_SET_ASIDE, FAILED_BATCHES, DEAD_LETTERS):
        found = alarm(observability, name)
        assert (found["Namespace"], found["MetricName"], found["Statistic"]) == (NAMESPACE, name, "Sum")
        # the dimension Powertools gives every metric: the functions' POWERTOOLS_SERVICE_NAME
        assert found["Dimensions"] == [{"Name": "service", "Value": "blackbox"}]
        assert found["Threshold"] == 1 and found["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert sorted(dev.processing.functions) == sorted(CONSUMERS)
    for consumer, function in dev.processing.functions.items():
        lag = alarm(observability, f"OffsetLag-{consumer}")
        # Lambda's own metric for a Kafka event source mapping, per function, at the topic level
        assert (lag["Namespace"], lag["MetricName"], lag["Statistic"]) == ("AWS/Lambda", "OffsetLag", "Maximum")
        [dimension] = lag["Dimensions"]
        assert dimension["Name"] == "FunctionName"
        assert dev.processing.get_logical_id(function.node.default_child) in json.dumps(dimension["Value"])
    assert alarm(observability, "Errors-replay")["MetricName"] == "Errors"


def test_a_scheduled_function_failing_at_every_run_alarms(templates: dict[str, Template]):
    """Found from outside: each function's Errors alarm asked for errors in 3 minutes in a row, which
    a run every 5 minutes (the replay) or a day (the purge, which also adds the MySQL day partitions)
    never gives: either could fail every run and page no one. A scheduled function's alarm counts its
    errors over periods that each hold one of its runs (the purge's, with its retries, within the hour
    it starts in), and alarms on as many failed runs in a row as it asks for."""
    observability = templates["observability"]
    every_s = {"replay": REPLAY_INTERVAL.to_seconds(), "webhooks": WEBHOOKS_INTERVAL.to_seconds(), "purge": 86_400}
    for name, interval_s in every_s.items():
        found = alarm(observability, f"Errors-{name}")
        runs = found.get("DatapointsToAlarm", found["EvaluationPeriods"])
        assert found["Threshold"] == 1 and runs <= found["EvaluationPeriods"]
        # each period holds a run: runs failing in a row breach as many periods in a row
        assert found["Period"] >= min(interval_s, 3600), name
    # a day's periods hold one run: its failure alone
    assert alarm(observability, "Errors-purge")["EvaluationPeriods"] == 1


def test_a_request_without_a_sentry_key_pages_no_one_and_a_failing_key_source_does(
        dev: Blackbox, templates: dict[str, Template]):
    """Found in review: the key source refuses a request without a key (a scanner, a misconfigured
    SDK) by raising, as Lambda authorizers answer 401, and Lambda counts that an error: its Errors
    alarm paged on the first day. Its failures are the native API's 5xx (500 from API Gateway)."""
    observability = templates["observability"]
    names = {a["AlarmName"] for a in resources(observability, "AWS::CloudWatch::Alarm")}
    assert f"{DEV.prefix}-Errors-capture" in names and f"{DEV.prefix}-Errors-key-source" not in names
    native = alarm(observability, "NativeApi5xx")
    assert (native["Namespace"], native["MetricName"], native["Statistic"]) == ("AWS/ApiGateway", "5XXError", "Sum")
    assert native["Dimensions"] == [{"Name": "ApiName", "Value": dev.api.native_api.rest_api_name}]


def test_the_alarm_topic_uses_a_key_cloudwatch_may_use(templates: dict[str, Template]):
    observability = templates["observability"]
    [key] = resources(observability, "AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True
    [grant] = [s for s in key["KeyPolicy"]["Statement"]
               if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert sorted(listed(grant["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert grant["Effect"] == "Allow" and "aws:SourceAccount" in grant["Condition"]["StringEquals"]
    key_id = next(iter(observability.find_resources("AWS::KMS::Key")))
    observability.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    # enforce_ssl replaces SNS's default topic policy: CloudWatch must be named as a publisher
    [policy] = resources(observability, "AWS::SNS::TopicPolicy")
    [publish] = [s for s in policy["PolicyDocument"]["Statement"]
                 if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert publish["Action"] == "sns:Publish" and publish["Effect"] == "Allow"
    assert f":alarm:{DEV.prefix}-*" in json.dumps(publish["Condition"]["ArnLike"]["aws:SourceArn"])
    topic_id = next(iter(observability.find_resources("AWS::SNS::Topic")))
    assert all(a["AlarmActions"] == [{"Ref": topic_id}] for a in resources(observability, "AWS::CloudWatch::Alarm"))


def test_a_webhooks_run_eventbridge_could_not_start_alarms(templates: dict[str, Template]):
    """Found in review: its dead-letter queue said "an alarm or a person sees it", and no alarm did."""
    found = alarm(templates["observability"], "WebhooksDeadLetters")
    assert (found["Namespace"], found["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert found["Threshold"] == 1 and found["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    [dimension] = found["Dimensions"]
    assert dimension["Name"] == "QueueName" and "WebhooksDeadLetters" in json.dumps(dimension["Value"])
