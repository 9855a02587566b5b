"""The API's door in AWS: a key and a usage plan per title, whose ids capture is told with their
skus; a web ACL with a rate limit per IP on the stage; and 429s, from the gateway or the web ACL,
that say when to retry. Every gateway answer is nosniff."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk.assertions import Annotations, Match, Template
from hypothesis import given
from hypothesis import strategies as st

from ports.limits import MAX_BODY_BYTES
from stacks.api import decimal_above, pascal_case
from stacks.config import DeployConfig, cdk_json_context
from tests.infrastructure.conftest import blackbox, resources

DEV = DeployConfig.model_validate(cdk_json_context()["environments"]["dev"])


def test_each_title_has_its_own_key_and_throttle_and_capture_knows_its_skus(templates: dict[str, Template]):
    api = templates["api"]
    assert DEV.titles, "cdk.json's dev environment lists a title"
    found = api.to_json()["Resources"]
    keys = {logical_id for logical_id, r in found.items() if r["Type"] == "AWS::ApiGateway::ApiKey"}
    plans = {p["UsagePlanName"]: p for p in resources(api, "AWS::ApiGateway::UsagePlan")}
    [capture] = [f for f in resources(api, "AWS::Lambda::Function") if f["Handler"] == "lambdas.capture.handler"]
    # {"Fn::Join": ["", ['{"', {"Ref": key}, '": ["sku", …]}']]}: resolve the key refs to see the map
    parts = capture["Environment"]["Variables"]["BLACKBOX_KEY_SKUS"]["Fn::Join"][1]
    key_skus = json.loads("".join(p["Ref"] if isinstance(p, dict) else p for p in parts))
    assert len(keys) == 2 + len(DEV.titles) and set(key_skus) < keys
    for name, title in DEV.titles.items():
        plan = plans[f"{DEV.prefix}-title-{name}"]
        assert plan["Throttle"] == {"RateLimit": title.throttle.rate, "BurstLimit": title.throttle.burst}
        [key] = [k for k in keys if k.startswith(f"Title{pascal_case(name)}Key")]
        assert key_skus[key] == title.skus
        # the plan holds that key alone, on the API's stage
        [binding] = [r for r in resources(api, "AWS::ApiGateway::UsagePlanKey") if r["KeyId"] == {"Ref": key}]
        assert found[binding["UsagePlanId"]["Ref"]]["Properties"]["UsagePlanName"] == f"{DEV.prefix}-title-{name}"
        assert plan["ApiStages"][0]["Stage"]
    assert f"TitleKeyId{pascal_case(next(iter(DEV.titles)))}" in api.to_json()["Outputs"]
    # the shared keys are no title's: they post any sku
    assert not {k for k in key_skus if k.startswith(("IngestKey", "ServerKey"))}


def test_the_stage_has_a_web_acl_that_answers_429_with_retry_after_per_ip(templates: dict[str, Template]):
    api = templates["api"]
    [acl] = resources(api, "AWS::WAFv2::WebACL")
    assert acl["Scope"] == "REGIONAL" and acl["DefaultAction"] == {"Allow": {}}
    [rule] = [r for r in acl["Rules"] if "RateBasedStatement" in r["Statement"]]
    assert rule["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "IP", "Limit": DEV.waf.limit_per_ip, "EvaluationWindowSec": DEV.waf.window_s}
    response = rule["Action"]["Block"]["CustomResponse"]
    headers = {h["Name"]: h["Value"] for h in response["ResponseHeaders"]}
    assert response["ResponseCode"] == 429
    assert headers == {"Retry-After": str(DEV.waf.window_s), "X-Content-Type-Options": "nosniff",
                       "Cache-Control": "no-store"}
    body = acl["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert json.loads(body["Content"])["error"] == "throttled" and body["ContentType"] == "APPLICATION_JSON"
    # associated with each API's own stage (the query and capture API's, the Sentry SDKs')
    associations = resources(api, "AWS::WAFv2::WebACLAssociation")
    stages = [k for k, r in api.to_json()["Resources"].items() if r["Type"] == "AWS::ApiGateway::Stage"]
    assert len(stages) == 2
    assert sorted(next(s for s in stages if json.dumps({"Ref": s}) in json.dumps(a["ResourceArn"]))
                  for a in associations) == sorted(stages)
    for association in associations:
        assert "/stages/" in json.dumps(association["ResourceArn"])
        assert association["WebACLArn"] == {"Fn::GetAtt": [next(k for k, r in api.to_json()["Resources"].items()
                                                                if r["Type"] == "AWS::WAFv2::WebACL"), "Arn"]}


def test_a_body_past_the_limit_is_413_at_the_web_acl(templates: dict[str, Template]):
    """Found in review: API Gateway lets 10 MB through, and a body past Lambda's 6 MB invoke (4.5 MB
    once API Gateway base64s it) failed the integration, which the gateway answers as a 5xx: a 503
    that clients retry, where the contract says 413."""
    [acl] = resources(templates["api"], "AWS::WAFv2::WebACL")
    [rule] = [r for r in acl["Rules"] if "RegexMatchStatement" in r["Statement"]]
    match = rule["Statement"]["RegexMatchStatement"]
    assert match["FieldToMatch"] == {"SingleHeader": {"Name": "content-length"}}
    assert match["RegexString"] == decimal_above(MAX_BODY_BYTES)
    # AWS WAF refuses a capturing group (its regex's unsupported constructs): found in review
    assert "(" not in match["RegexString"].replace("(?:", "")
    response = rule["Action"]["Block"]["CustomResponse"]
    assert response["ResponseCode"] == 413
    assert {h["Name"]: h["Value"] for h in response["ResponseHeaders"]} == {
        "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
    body = acl["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert json.loads(body["Content"])["error"] == "payload_too_large" and body["ContentType"] == "APPLICATION_JSON"


@given(st.integers(0, 10 ** 12) | st.sampled_from([MAX_BODY_BYTES - 1, MAX_BODY_BYTES, MAX_BODY_BYTES + 1]),
       st.integers(0, 3), st.integers(0, 5000))
def test_the_pattern_of_a_limit_matches_the_numbers_past_it(n: int, zeros: int, limit: int):
    # the web ACL reads the header's text: leading zeros are the same number
    for bound in (limit, MAX_BODY_BYTES):
        assert bool(re.fullmatch(decimal_above(bound), "0" * zeros + str(n))) == (n > bound), (n, bound)


def test_gateway_429s_say_when_to_retry_and_every_gateway_answer_is_nosniff(templates: dict[str, Template]):
    responses = {r["ResponseType"]: r for r in resources(templates["api"], "AWS::ApiGateway::GatewayResponse")}
    for kind, retry_after in (("THROTTLED", "'1'"), ("QUOTA_EXCEEDED", "'60'")):
        assert responses[kind]["StatusCode"] == "429"
        assert responses[kind]["ResponseParameters"]["gatewayresponse.header.Retry-After"] == retry_after
    for kind, response in responses.items():
        headers = response["ResponseParameters"]
        assert headers["gatewayresponse.header.X-Content-Type-Options"] == "'nosniff'", kind
        assert headers["gatewayresponse.header.Cache-Control"] == "'no-store'", kind
        assert headers["gatewayresponse.header.Content-Type"] == "'application/json'", kind
        if response["StatusCode"] != "429":
            assert "gatewayresponse.header.Retry-After" not in headers, kind


def test_prod_has_its_titles_and_limit():
    _, prod = blackbox("prod")
    config = prod.config
    api = Template.from_stack(prod.api)
    assert config.titles and config.waf.limit_per_ip != DEV.waf.limit_per_ip
    names = {p["UsagePlanName"] for p in resources(api, "AWS::ApiGateway::UsagePlan")}
    assert {f"{config.prefix}-title-{name}" for name in config.titles} < names
    [acl] = resources(api, "AWS::WAFv2::WebACL")
    [rate] = [r["Statement"]["RateBasedStatement"] for r in acl["Rules"] if "RateBasedStatement" in r["Statement"]]
    assert rate["Limit"] == config.waf.limit_per_ip


def _throttle_warnings(env: str, **overrides: Any) -> list[str]:
    context = cdk_json_context()
    stage = {**context["environments"][env], **overrides}
    _, made = blackbox(env, environments={**context["environments"], env: stage})
    warnings = Annotations.from_stack(made.api).find_warning("*", Match.string_like_regexp("throttle"))
    return [str(w.entry.data) for w in warnings]


def test_the_usage_plans_fit_the_accounts_own_throttle_or_synth_says_so():
    """Found from outside: prod's server key allowed 20,000 requests a second (burst 40,000) where
    API Gateway throttles an account's region at 10,000 (burst 5,000) before any plan, unsaid."""
    assert _throttle_warnings("dev") == []
    assert _throttle_warnings("prod") == []
    [warning] = _throttle_warnings("prod", server_throttle={"rate": 9000, "burst": 9000})
    assert "12,000 requests a second" in warning and "burst of 9,000" in warning and "Service Quotas" in warning


def test_a_function_is_allowed_to_the_api_once_a_method_and_not_to_its_console_test(templates: dict[str, Template]):
    """Found in review: each method added two permissions to its function's resource policy, one for the
    console's test invocations: the leaderboards' 32 were some 15 KB of the policy's 20 KB, a few
    routes from a deploy that fails."""
    permissions = resources(templates["api"], "AWS::Lambda::Permission")
    assert permissions and not [p for p in permissions if "test-invoke-stage" in json.dumps(p)]


def test_one_cloudwatch_role_setting_for_both_apis_before_either_stage(templates: dict[str, Template]):
    """Found in review: each REST API set the account's API Gateway CloudWatch role (one setting an
    account and region), both at once on a first deploy, the last written winning."""
    api = templates["api"]
    [(account_id, _)] = api.find_resources("AWS::ApiGateway::Account").items()
    stages = api.find_resources("AWS::ApiGateway::Stage")
    assert len(stages) == 2  # logging to CloudWatch needs the setting first, on both
    assert all(account_id in stage.get("DependsOn", []) for stage in stages.values())
